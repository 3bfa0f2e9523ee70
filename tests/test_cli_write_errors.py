"""A report that cannot be written (stdout redirected to a full device) ends ``attncheck`` with
one line on stderr and exit status 2, not a traceback nor the exit status of a finding (1)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("fmt", ["json", "concise"])
def test_lint_to_a_full_stdout_is_one_line_and_exit_2(tmp_path, fmt):
    src = tmp_path / "attn.py"
    src.write_text("import torch\n\ndef attn(q, k, v):\n    return (q @ k.transpose(-2, -1)).softmax(-1) @ v\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "attncheck", "lint", str(src),
                               "--output-format", fmt], stdout=full, stderr=subprocess.PIPE,
                              text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0], proc.stderr
