"""`attncheck check`: CliRunner and a subprocess of the installed entry point."""
import json
import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from attncheck.cli import main

from _dynamic_helpers import FIX

DYN = os.path.join(FIX, "dynamic")
FAST = ["--max-examples", "2", "--device", "cpu"]


def run(*args):
    return CliRunner().invoke(main, ["check", *args])


def test_json_pass_exit_0():
    r = run(f"{DYN}/sdpa_kernels.py:sdpa_causal", "--causal", "--checks", "shapes,normalization",
            "--format", "json", *FAST)
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["version"] == 1 and d["target"].endswith("sdpa_kernels.py:sdpa_causal")
    assert [x["check"] for x in d["results"]] == ["shapes", "normalization"]
    assert all(x["status"] == "pass" and isinstance(x["metrics"], dict) for x in d["results"])
    assert d["mode"] == "eval" and d["device"] == "cpu"


def test_fail_exit_1_text_table_with_reproduction():
    r = run(f"{DYN}/buggy_modules.py:WrongShapeAttention", "--checks", "shapes,determinism",
            "--seed", "3", *FAST)
    assert r.exit_code == 1, r.output
    assert "shapes" in r.output and "fail" in r.output and "FAILED" in r.output
    assert "smallest failing example" in r.output and "--seed 3" in r.output


def test_error_exit_1_and_timeout_option():
    r = run(f"{DYN}/buggy_modules.py:HangingAttention", "--checks", "shapes", "--timeout",
            "0.5", "--format", "json", *FAST)
    assert r.exit_code == 1
    res = json.loads(r.output)["results"][0]
    assert res["status"] == "error" and "timed out" in res["message"]
    # the reproduction replays under the same limit, not the 60 s default
    assert res["details"].endswith("--max-examples 2 --timeout 0.5")


@pytest.mark.parametrize("args,needle", [
    (["nope.py:f"], "not found"),
    ([f"{DYN}/buggy_modules.py:Missing"], "has no attribute"),
    ([f"{DYN}/sdpa_kernels.py:sdpa", "--checks", "bogus"], "unknown check"),
    ([f"{DYN}/sdpa_kernels.py:sdpa", "--dtype", "int3"], "unknown dtype"),
    ([f"{DYN}/sdpa_kernels.py:sdpa", "--hint", "layout=XYZ"], "unknown layout"),
    (["no-colon"], "bad target spec"),
])
def test_usage_errors_exit_2(args, needle):
    r = CliRunner().invoke(main, ["check", *args])
    assert r.exit_code == 2, r.output
    assert needle in r.output


def test_installed_entry_point_subprocess(tmp_path):
    exe = shutil.which("attncheck") or os.path.join(os.path.dirname(sys.executable), "attncheck")
    p = subprocess.run([exe, "check", f"{DYN}/buggy_modules.py:NaNAttention", "--checks",
                        "finite", "--format", "json", *FAST], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert p.returncode == 1, p.stderr
    d = json.loads(p.stdout)
    assert d["results"][0]["status"] == "fail" and "non-finite" in d["results"][0]["message"]
    assert not (tmp_path / ".hypothesis").exists()   # no example database in the user's dir


def test_terminal_rendering_escapes_markup_and_summarises():
    from rich.console import Console

    from attncheck.report.terminal import render_report, report_json
    from attncheck.results import CheckResult, Report

    rep = Report("t", [CheckResult("shapes", "fail", "bad [red]x", {"max": float("nan")},
                                   "reproduce: attncheck check t --seed 1"),
                       CheckResult("finite", "pass", "ok", {"examples": 3})])
    con = Console(record=True, width=120)
    render_report(rep, con)
    text = con.export_text()
    assert "bad [red]x" in text and "reproduce: attncheck check t --seed 1" in text
    assert "FAILED: 1 pass, 1 fail" in text
    import json as _json

    assert _json.loads(report_json(rep))["results"][0]["metrics"]["max"] == "nan"
