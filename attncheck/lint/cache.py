"""Per-file result cache (``.attncheck_cache/``).

An entry holds one file's findings (and whether it was parsed) under a key that hashes

- the *engine fingerprint*: the attncheck version, and the size and modification time of every
  module of the lint path (``attncheck/lint/**.py``, ``attncheck/config.py``) and of libcst's
  package — editing a rule invalidates the cache even without a version bump;
- the *settings that affect findings*: the enabled rule codes of the file (after ``select`` /
  ``ignore`` / ``per-file-ignores``);
- the file's *content* (its bytes), not its path or modification time: a renamed or touched file
  still hits; the reported path is filled in when the entry is read.

An entry also holds what the file's analysis read of *other* linted files (helpers it imports,
:mod:`attncheck.lint.project`): each module look-up with the file it found, each file read with
its content hash, and the file's own real path (a file linted alone has entries of its own).  It
is used only when every look-up finds the
same file again, every such file has the same content, and the file is at the same path (a
relative import depends on it); otherwise it is a miss and is rewritten.

Layout: ``<cache-dir>/v1/<key[:2]>/<key>.json`` plus ``CACHEDIR.TAG`` and a ``.gitignore`` of
``*`` at the top (as ruff does).  Writes go to a temporary file in the same directory, then
:func:`os.replace` (atomic on POSIX and Windows), so concurrent runs sharing a cache never see a
partial entry: the last writer wins and every writer writes the same content.  An unreadable or
corrupt entry is a miss.  Runs with ``--fix``/``--diff`` and standard input bypass the cache.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from attncheck.atomic import atomic_write
from attncheck.lint.finding import Edit, Finding, Fix

DEFAULT_DIR = ".attncheck_cache"
LAYOUT = "v1"

_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
        "# This file is a cache directory tag created by attncheck.\n"
        "# For information about cache directory tags see https://bford.info/cachedir/\n")

_fingerprint: str | None = None


def fingerprint() -> str:
    """Hash of what the findings depend on besides settings and content (see module doc)."""
    global _fingerprint
    if _fingerprint is not None:
        return _fingerprint
    import importlib.util

    from attncheck._version import __version__

    h = hashlib.sha256(f"attncheck {__version__}\n".encode())
    pkg = Path(__file__).resolve().parent.parent
    files = sorted(pkg.joinpath("lint").rglob("*.py")) + [pkg / "config.py", pkg / "_version.py"]
    spec = importlib.util.find_spec("libcst")
    if spec is not None and spec.origin:
        files.append(Path(spec.origin))
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    _fingerprint = h.hexdigest()
    return _fingerprint


def _finding_to_json(f: Finding) -> dict:
    d = f.to_dict()
    del d["path"]
    return d


def _finding_from_json(d: dict, path: str) -> Finding:
    fix = d.get("fix")
    if fix is not None:
        fix = Fix(fix["message"], tuple(Edit(**e) for e in fix["edits"]), fix["applicability"])
    return Finding(path, d["line"], d["col"], d["end_line"], d["end_col"], d["code"], d["name"],
                   d["severity"], d["message"], fix, cell=d.get("cell"))


class Cache:
    """A cache directory.  ``get``/``put`` never raise on I/O problems (a miss / no-op)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.root = Path(directory)
        self.dir = self.root / LAYOUT
        self._ready = False
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(enabled: frozenset[str], data: bytes, linked: bool = False) -> str:
        """``linked``: the file is linted with other files whose helpers it may import (its
        entries then record what it read of them); a file linted alone has other entries."""
        h = hashlib.sha256(fingerprint().encode())
        h.update(b"\0" + ",".join(sorted(enabled)).encode() + (b"\0linked\0" if linked else b"\0"))
        h.update(data)
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str, display: str, project=None,
            path: str | None = None) -> tuple[list[Finding], bool] | None:
        """(findings with ``path = display``, parsed) or ``None`` on a miss.  ``project``, ``path``:
        the linted files and this file's real path, against which the entry's record of other
        files is checked (see the module doc)."""
        from attncheck.lint.project import Dependencies

        try:
            with open(self._path(key), encoding="utf-8") as fh:
                d = json.load(fh)
            deps = d.get("deps")
            if deps and (d.get("path") != path or not Dependencies.still_valid(project, deps)):
                raise ValueError("stale: another linted file changed")
            out = [_finding_from_json(x, display) for x in d["findings"]], bool(d["parsed"])
        except (OSError, ValueError, KeyError, TypeError):
            self.misses += 1
            return None
        self.hits += 1
        return out

    def _prepare(self) -> None:
        if self._ready:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        for name, text in (("CACHEDIR.TAG", _TAG), (".gitignore", "*\n")):
            p = self.root / name
            if not p.exists():
                atomic_write(p, text, durable=False)
        self._ready = True

    def put(self, key: str, findings: list[Finding], parsed: bool, deps=None,
            path: str | None = None) -> None:
        """Store one file's result; ``deps``: the :class:`~attncheck.lint.project.Dependencies`
        of its analysis, ``path`` its real path."""
        try:
            self._prepare()
            p = self._path(key)
            p.parent.mkdir(exist_ok=True)
            entry = {"parsed": parsed, "findings": [_finding_to_json(f) for f in findings]}
            if deps:
                entry["deps"] = deps.to_json()
                entry["path"] = path
            atomic_write(p, json.dumps(entry), durable=False)
        except OSError:
            pass


def _manifest_path(directory) -> Path:
    return Path(directory) / LAYOUT / f"rules-{fingerprint()[:32]}.json"


def load_manifest(directory) -> list[dict] | None:
    """The rule list (code, name, default_enabled) saved for this engine fingerprint, or None."""
    try:
        with open(_manifest_path(directory), encoding="utf-8") as fh:
            rows = json.load(fh)
        if isinstance(rows, list) and all({"code", "name", "default_enabled"} <= set(r)
                                          for r in rows):
            return rows
    except (OSError, ValueError, TypeError):
        pass
    return None


def save_manifest(directory, rows: list[dict]) -> None:
    c = Cache(directory)
    try:
        c._prepare()
        atomic_write(_manifest_path(directory), json.dumps(rows), durable=False)
    except OSError:
        pass
