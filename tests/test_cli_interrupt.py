"""Ctrl-C (SIGINT) ends ``attncheck lint``, ``check`` and ``audit`` with exit status 130 and one
short line on stderr, never click's "Aborted!" (exit 1, indistinguishable from a finding) nor a
traceback.

The subprocess tests send a real SIGINT to the process group (what a terminal does on Ctrl-C)
once the command is provably inside its work: ``lint -`` blocked reading stdin (seen in
``/proc/<pid>/wchan``), ``check`` / ``audit`` inside the target's forward (it writes a marker
file, then sleeps).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from attncheck.cli import EXIT_INTERRUPTED, main

SLOW_LAYER = '''
import os, time
from torch import nn


class Slow(nn.Module):
    """A layer whose forward never returns (until interrupted)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        open(os.environ["ATTNCHECK_TEST_MARKER"], "w").close()
        while True:
            time.sleep(0.02)


def make_layer():
    return Slow()
'''


def test_keyboard_interrupt_in_a_command_exits_130(monkeypatch, tmp_path):
    import attncheck.lint.engine as engine

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "lint_paths", interrupted)
    (tmp_path / "m.py").write_text("x = 1\n")
    r = CliRunner().invoke(main, ["lint", "--no-cache", str(tmp_path / "m.py")])
    assert r.exit_code == EXIT_INTERRUPTED == 130
    assert "attncheck: interrupted" in r.output
    assert "Aborted!" not in r.output and "Traceback" not in r.output


def _script() -> list[str]:
    exe = Path(sys.executable).with_name("attncheck")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "attncheck"]


def _wait(predicate, proc: subprocess.Popen, what: str, limit: float = 120.0) -> None:
    t0 = time.monotonic()
    while not predicate():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"{what}: exited {proc.returncode} before the interrupt\n{out}\n{err}")
        if time.monotonic() - t0 > limit:
            proc.kill()
            pytest.fail(f"{what}: not reached within {limit} s")
        time.sleep(0.05)


def _default_sigint() -> None:
    """Run in the child before exec: SIGINT back to its default action.  A process started in
    the background by a non-interactive shell (``cmd &``, CI runners) inherits SIGINT ignored,
    and Python keeps an inherited SIG_IGN (as every Unix program should: ``nohup``), so the test
    sets the state an interactive Ctrl-C meets."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _blocked_reading_pipe(pid: int) -> bool:
    try:
        return "pipe_read" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/wchan").exists(), reason="needs Linux /proc")
def test_sigint_exits_130_without_traceback(tmp_path):
    (tmp_path / "slow.py").write_text(SLOW_LAYER)
    env = dict(os.environ, NO_COLOR="1")
    procs = {}
    # lint: blocked on stdin; check / audit: inside the target's forward
    procs["lint"] = subprocess.Popen(_script() + ["lint", "--no-cache", "-"], env=env,
                                     cwd=tmp_path, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True, preexec_fn=_default_sigint)
    for cmd, args in (("check", ["--device", "cpu", "--timeout", "0"]),
                      ("audit", ["--device", "cpu", "--checks", "causality"])):
        marker = tmp_path / f"{cmd}.started"
        procs[cmd] = subprocess.Popen(
            _script() + [cmd, "slow.py:make_layer", *args],
            env=dict(env, ATTNCHECK_TEST_MARKER=str(marker)), cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
            preexec_fn=_default_sigint)
    ready = {"lint": lambda: _blocked_reading_pipe(procs["lint"].pid),
             "check": (tmp_path / "check.started").exists,
             "audit": (tmp_path / "audit.started").exists}
    try:
        for cmd, proc in procs.items():
            _wait(ready[cmd], proc, cmd)
            os.killpg(proc.pid, signal.SIGINT)
        for cmd, proc in procs.items():
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 130, (cmd, out, err)
            assert err.strip() == "attncheck: interrupted", (cmd, err)
            assert "Traceback" not in out + err and "Aborted!" not in out + err
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists(),
                    reason="needs Linux /proc/<pid>/task/<pid>/children")
def test_sigint_during_a_parallel_lint_stops_the_workers_at_once(tmp_path):
    """Ctrl-C while worker processes lint: exit 130 at once (not after the queued files), no
    worker traceback, no worker left running."""
    src = (Path(__file__).resolve().parents[1] / "fixtures" / "lint" / "correct" /
           "textbook_mha.py").read_text(encoding="utf-8")
    for i in range(600):
        (tmp_path / f"attn_{i:03d}.py").write_text(src, encoding="utf-8")
    proc = subprocess.Popen(_script() + ["lint", "--no-cache", "--isolated", "-j", "2", "."],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, preexec_fn=_default_sigint,
                            env=dict(os.environ, NO_COLOR="1"))
    try:
        _wait(lambda: len(_children(proc.pid)) >= 2, proc, "lint workers")
        workers = _children(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=120)
        waited = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (out, err)
    assert err.strip() == "attncheck: interrupted" and out == ""
    assert waited < 10, f"took {waited:.1f} s to stop"
    time.sleep(0.5)
    assert not [w for w in workers if _alive(w)]
