"""attncheck.atomic.atomic_write: the single writer of --fix, the cache and HTML reports."""
from __future__ import annotations

import os
import stat

import pytest

from attncheck.atomic import atomic_write


def _leftovers(d):
    return [p.name for p in d.iterdir() if p.name.endswith(".attncheck-tmp")]


def test_new_file_gets_default_mode_and_utf8_text(tmp_path):
    p = tmp_path / "new.txt"
    old = os.umask(0o022)
    try:
        atomic_write(p, "q·kᵀ\r\n", durable=False)
    finally:
        os.umask(old)
    assert p.read_bytes() == "q·kᵀ\r\n".encode("utf-8")
    assert stat.S_IMODE(p.stat().st_mode) == 0o644
    assert _leftovers(tmp_path) == []


def test_existing_file_keeps_mode_and_symlink_stays(tmp_path):
    target = tmp_path / "model.py"
    target.write_bytes(b"old\n")
    os.chmod(target, 0o751)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    atomic_write(link, b"new\n")
    assert link.is_symlink()
    assert target.read_bytes() == b"new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o751


def test_failure_leaves_target_unchanged_and_no_temporary(tmp_path, monkeypatch):
    p = tmp_path / "model.py"
    p.write_bytes(b"old\n")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(p, b"new\n")
    assert p.read_bytes() == b"old\n"
    assert _leftovers(tmp_path) == []


def test_non_regular_target_is_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        atomic_write(fifo, b"x")
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_check_writable_accepts_a_new_file_in_a_writable_directory(tmp_path):
    from attncheck.atomic import check_writable

    check_writable(tmp_path / "new.html")  # does not raise, creates nothing
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("case", ["missing_dir", "parent_is_file", "path_is_dir"])
def test_check_writable_refuses_what_atomic_write_cannot_create(tmp_path, case):
    from attncheck.atomic import check_writable

    (tmp_path / "file").write_text("x")
    path = {"missing_dir": tmp_path / "nope" / "r.html",
            "parent_is_file": tmp_path / "file" / "r.html",
            "path_is_dir": tmp_path}[case]
    with pytest.raises(OSError) as info:
        check_writable(path)
    assert info.value.filename
    with pytest.raises(OSError):  # the check agrees with the writer
        atomic_write(path, "x")
