"""Atomic file replacement, the one writer every attncheck output goes through.

A file is written to a temporary file in the same directory, then moved over the target with
:func:`os.replace` (atomic on POSIX and Windows): a reader, a concurrent writer or a crash at any
moment sees the old contents or the new, never a truncated file, and no temporary file is left
behind on error.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["atomic_write", "check_writable"]


def check_writable(path: str | Path) -> None:
    """Raise ``OSError`` (with ``filename`` set) when :func:`atomic_write` could not create or
    replace ``path``: its directory is missing, is not a directory, or is not writable, or
    ``path`` itself is a directory.  Lets a command refuse an output path before long work."""
    import errno

    target = os.path.realpath(path)
    parent = os.path.dirname(target) or "."
    if os.path.isdir(target):
        raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not os.path.exists(parent):
        raise OSError(errno.ENOENT, "no such directory", parent)
    if not os.path.isdir(parent):
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), parent)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OSError(errno.EACCES, "directory not writable", parent)


def atomic_write(path: str | Path, data: bytes | str, *, durable: bool = True) -> None:
    """Replace (or create) ``path`` with ``data`` atomically.

    ``data`` is bytes, or text written as UTF-8 (no newline translation).  An existing target
    keeps its permission bits and, where allowed, its owner; a symlink is followed (its target is
    replaced, the link stays); a new file gets the default mode (``0o666`` less the umask).
    ``durable=True`` flushes the data to disk before the move (source files being rewritten);
    caches pass ``False``.  Raises ``OSError`` (also when the target exists and is not a regular
    file); the target is then unchanged.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    target = os.path.realpath(path)
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path}: not a regular file")
    directory, name = os.path.split(target)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}-{os.urandom(6).hex()}.attncheck-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        if st is not None:
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
            try:
                os.chown(tmp, st.st_uid, st.st_gid)
            except (OSError, AttributeError):  # not ours to give away: keep the writer as owner
                pass
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
