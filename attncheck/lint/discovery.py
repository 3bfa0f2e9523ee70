"""File discovery: expand the paths given on the command line into Python files.

- A file named explicitly is always linted (whatever its extension or the exclude patterns — as
  ruff does without ``--force-exclude``).  With ``--force-exclude`` (:func:`is_force_excluded`),
  a path named explicitly is skipped when it, or a directory between it and the config's
  directory, is excluded: pre-commit passes every changed file by name.
- A directory is walked recursively for ``*.py`` / ``*.pyi`` files, in sorted order, skipping
  :data:`DEFAULT_EXCLUDES` (directory names) and the config's ``exclude`` globs.
- A directory is walked for Jupyter notebooks (``*.ipynb``) too; their code cells are linted
  (:mod:`attncheck.lint.notebook`).
- ``-`` means standard input.

Paths that cannot be linted (the convention of ``attncheck lint``'s exit codes: these are
errors, exit 2 whatever ``--exit-zero`` says; ruff reports the same conditions as ``E902``):

- named on the command line: a path that does not exist, a symlink loop, a broken symlink, a
  directory that cannot be listed, a file that is not a regular file (FIFO, socket, device);
- inside a walked directory: a directory that cannot be listed, and a ``*.py``/``*.ipynb`` entry
  that is a symlink loop, a broken symlink or cannot be stat'ed.  Entries that are not regular
  files (a FIFO named ``x.py``) are skipped: nothing that is not a regular file is ever opened.

``exclude`` globs use :func:`fnmatch.fnmatch` (``*`` also matches ``/``) and are matched against
the path relative to the config's directory (POSIX separators) *and* against the bare name, so
``legacy``, ``*/migrations/*`` and ``tests/fixtures/*`` all work.
"""
from __future__ import annotations

import errno
import os
import stat
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
NOTEBOOK_SUFFIX = ".ipynb"
STDIN = "-"


class PathError(Exception):
    """A path given on the command line cannot be linted; ``str(exc)`` is ``"PATH: reason"``."""


class PathNotFound(PathError):
    """A path given on the command line does not exist."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: no such file or directory")


def os_reason(exc: OSError) -> str:
    """A short reason for an ``OSError`` (``strerror``; a symlink loop named as such)."""
    if exc.errno == errno.ELOOP:
        return "symlink loop (too many levels of symbolic links)"
    return exc.strerror.lower() if exc.strerror else str(exc)


def file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def check_path(arg: str) -> os.stat_result:
    """``os.stat`` of a command-line path, or :class:`PathError` saying why it cannot be
    linted (missing, broken symlink, symlink loop, unreadable directory, not a regular file)."""
    try:
        st = os.stat(arg)
    except FileNotFoundError:
        if os.path.islink(arg):
            raise PathError(f"{arg}: broken symbolic link (to {os.readlink(arg)!r})") from None
        raise PathNotFound(arg) from None
    except OSError as exc:
        raise PathError(f"{arg}: {os_reason(exc)}") from None
    if stat.S_ISDIR(st.st_mode):
        try:
            with os.scandir(arg):
                pass
        except OSError as exc:
            raise PathError(f"{arg}: cannot read directory: {os_reason(exc)}") from None
    elif not stat.S_ISREG(st.st_mode):
        raise PathError(f"{arg}: {file_kind(st.st_mode)}, not a regular file: not linted")
    return st


class FileTooLarge(Exception):
    """A file is larger than the size limit (``size``, ``limit`` in bytes)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size} bytes > {limit}")
        self.size, self.limit = size, limit


def read_regular(path: str | Path, limit: int | None = None) -> bytes:
    """The bytes of a regular file.  Opened non-blocking and checked with ``fstat`` before any
    read, so a FIFO or device that replaced the file after discovery is never read from (a
    blocking open of a FIFO would wait for a writer forever).  Raises ``OSError`` (``EINVAL``
    for a file that is not a regular one) and :class:`FileTooLarge` when the file has more
    than ``limit`` bytes (nothing is read then)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{file_kind(st.st_mode)}, not a regular file", str(path))
        if limit is not None and st.st_size > limit:
            raise FileTooLarge(st.st_size, limit)
        chunks = []
        while True:
            b = os.read(fd, max(st.st_size + 1, 1 << 16))
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _rel(path: Path, root: Path) -> str | None:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
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


def discover(arg: str, exclude: list[str], root: Path,
             errors: list[str] | None = None) -> list[Source]:
    """Expand one command-line path.  Raises :class:`PathError` (:class:`PathNotFound`) for a
    path that cannot be linted (see the module docstring); problems met inside a walked
    directory are appended to ``errors`` (``"PATH: reason"``) and the walk goes on."""
    if arg == STDIN:
        return [Source(STDIN, None)]
    st = check_path(arg)
    p = Path(arg)
    if not stat.S_ISDIR(st.st_mode):
        return [Source(arg, p)]
    errors = errors if errors is not None else []
    out: list[Source] = []

    def unreadable(exc: OSError) -> None:
        errors.append(f"{exc.filename}: cannot read directory: {os_reason(exc)}")

    for dirpath, dirnames, filenames in os.walk(p, onerror=unreadable):
        d = Path(dirpath)
        dirnames[:] = sorted(n for n in dirnames
                             if not is_excluded_dir(d / n, exclude, root))
        for name in sorted(filenames):
            if not name.endswith(PY_SUFFIXES + (NOTEBOOK_SUFFIX,)):
                continue
            f = d / name
            if matches(f, exclude, root):
                continue
            try:
                mode = os.stat(f).st_mode
            except FileNotFoundError:
                errors.append(f"{f}: broken symbolic link")
                continue
            except OSError as exc:
                errors.append(f"{f}: {os_reason(exc)}")
                continue
            if stat.S_ISREG(mode):
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
