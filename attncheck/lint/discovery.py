"""File discovery: expand the paths given on the command line into Python files.

- A file named explicitly is always linted (whatever its extension or the exclude patterns — as
  ruff does without ``--force-exclude``).  With ``--force-exclude`` (:func:`is_force_excluded`),
  a path named explicitly is skipped when it, or a directory between it and the config's
  directory, is excluded: pre-commit passes every changed file by name.
- A directory is walked recursively for ``*.py`` / ``*.pyi`` files, in sorted order, skipping
  :data:`DEFAULT_EXCLUDES` (directory names) and the config's ``exclude`` globs.
- ``-`` means standard input.

``exclude`` globs use :func:`fnmatch.fnmatch` (``*`` also matches ``/``) and are matched against
the path relative to the config's directory (POSIX separators) *and* against the bare name, so
``legacy``, ``*/migrations/*`` and ``tests/fixtures/*`` all work.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

#: Directory names never descended into.
DEFAULT_EXCLUDES = frozenset({
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".env", "env", "build", "dist",
    "__pycache__", "node_modules", ".tox", ".nox", ".eggs", "site-packages", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".attncheck_cache", ".hypothesis", ".ipynb_checkpoints",
    "__pypackages__", "_build", "buck-out",
})
PY_SUFFIXES = (".py", ".pyi")
STDIN = "-"


class PathNotFound(Exception):
    """A path given on the command line does not exist."""


def _rel(path: Path, root: Path) -> str | None:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def matches(path: Path, patterns: list[str], root: Path) -> bool:
    """True when ``path`` matches one of the glob ``patterns`` (relative to ``root``, or the
    bare file/directory name)."""
    if not patterns:
        return False
    rel = _rel(path, root)
    name = path.name
    for pat in patterns:
        pat = pat.rstrip("/")
        if pat.startswith("./"):
            pat = pat[2:]
        if fnmatch(name, pat) or (rel is not None and fnmatch(rel, pat)):
            return True
    return False


def is_excluded_dir(path: Path, patterns: list[str], root: Path) -> bool:
    return path.name in DEFAULT_EXCLUDES or matches(path, patterns, root)


@dataclass(frozen=True)
class Source:
    """One input: ``display`` is the path as reported; ``path`` is ``None`` for stdin."""

    display: str
    path: Path | None


def discover(arg: str, exclude: list[str], root: Path) -> list[Source]:
    """Expand one command-line path.  Raises :class:`PathNotFound`."""
    if arg == STDIN:
        return [Source(STDIN, None)]
    p = Path(arg)
    if not p.exists():
        raise PathNotFound(arg)
    if p.is_file():
        return [Source(arg, p)]
    out: list[Source] = []
    for dirpath, dirnames, filenames in os.walk(p):
        d = Path(dirpath)
        dirnames[:] = sorted(n for n in dirnames
                             if not is_excluded_dir(d / n, exclude, root))
        for name in sorted(filenames):
            if not name.endswith(PY_SUFFIXES):
                continue
            f = d / name
            if matches(f, exclude, root):
                continue
            out.append(Source(str(f), f))
    return out


def is_force_excluded(path: Path, patterns: list[str], root: Path) -> bool:
    """``--force-exclude`` (ruff's semantics): True when ``path`` (a file or directory named on the
    command line) or one of its parent directories up to ``root`` matches the ``exclude`` globs
    or is one of :data:`DEFAULT_EXCLUDES`.  Directories above ``root`` are not considered, so a
    project that itself lives under e.g. ``build/`` is still linted."""
    p = Path(path).resolve()
    r = Path(root).resolve()
    chain = [Path(path), p]
    for parent in p.parents:
        if parent == r or r not in parent.parents:
            break
        chain.append(parent)
    return any(is_excluded_dir(q, patterns, root) for q in chain)
