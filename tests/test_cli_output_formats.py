"""``check`` / ``audit`` output for logs, format option parity with ``lint``, and option values
rejected as usage errors (exit 2) before anything runs.

- ``--output-format`` and ``--format`` are the same option on ``lint``, ``check`` and ``audit``;
- ``text`` (the default) is the rich table on a terminal and, when stdout is not a terminal (CI
  logs, pipes), one unwrapped line per check: ``status check: message [numbers]``, whatever the
  terminal width (``COLUMNS``);
- ``--timeout -1`` / ``nan``, ``--max-examples 0``, a seed torch cannot take, ``--jobs -1`` are
  click usage errors.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from attncheck.cli import main
from attncheck.dynamic.cli import OUTPUT_FORMATS
from attncheck.report.terminal import resolve_text_format

ROOT = Path(__file__).resolve().parents[1]
BUGGY = f"{ROOT}/fixtures/dynamic/buggy_modules.py:WrongShapeAttention"
FAST = ["--checks", "determinism,shapes", "--max-examples", "2", "--device", "cpu"]
STATUS = ("pass", "fail", "warn", "skip", "error")


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def _check_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.split(" ", 1)[0] in STATUS]


def _expected_lines(report: dict) -> list[str]:
    return [f"{r['status']:<5} {r['check']}: {' '.join(r['message'].split())}"
            for r in report["results"]]


@pytest.fixture(scope="module")
def buggy_json() -> dict:
    r = _invoke("check", BUGGY, *FAST, "--format", "json")
    assert r.exit_code == 1, r.output
    return json.loads(r.output)


def test_check_concise_is_one_line_per_check(buggy_json):
    for spelling in ("--format", "--output-format"):
        r = _invoke("check", BUGGY, *FAST, spelling, "concise")
        assert r.exit_code == 1, r.output
        lines = _check_lines(r.output)
        expected = _expected_lines(buggy_json)
        assert [line.split(" [")[0] for line in lines] == expected
        assert lines[0].endswith(" [examples=2 max_abs_diff=0]")   # the numbers
        out = r.output.splitlines()
        assert out[0] == f"attncheck check {BUGGY} (cpu, float32, eval mode)"
        assert out[-1] == "FAILED: 1 pass, 1 fail"
        # the failure's reproduction line sits indented under its check line
        i = out.index(lines[1])
        assert out[i + 1].startswith("    smallest failing example: ")
        assert out[i + 2].startswith("    reproduce: attncheck check ")
        assert not any(ch in r.output for ch in "┏│└━")


def test_check_text_is_concise_when_not_a_terminal_and_full_is_a_table(buggy_json):
    r = _invoke("check", BUGGY, *FAST)   # CliRunner's stdout is not a terminal
    assert [line.split(" [")[0] for line in _check_lines(r.output)] == \
        _expected_lines(buggy_json)
    full = _invoke("check", BUGGY, *FAST, "--output-format", "full")
    assert full.exit_code == 1 and "┏" in full.output and "determinism" in full.output
    assert not any(line.startswith("pass  ") for line in full.output.splitlines())


def test_text_resolves_to_full_on_a_terminal_only():
    main_fd, tty_fd = os.openpty()
    with open(tty_fd, "w") as tty, open(os.devnull, "w") as null:
        assert resolve_text_format("text", tty) == "full"
        assert resolve_text_format("text", null) == "concise"
        for fmt in ("full", "concise", "json"):
            assert resolve_text_format(fmt, tty) == resolve_text_format(fmt, null) == fmt
    os.close(main_fd)
    assert OUTPUT_FORMATS == ("text", "full", "concise", "json")


def test_force_color_does_not_bring_back_tables(monkeypatch):
    """CI systems set FORCE_COLOR for coloured logs; the log still gets one line per check."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    r = _invoke("check", BUGGY, *FAST)
    assert _check_lines(r.output) and "┏" not in r.output


def test_audit_concise_lists_each_check_and_the_lint_findings():
    demo = ROOT / "fixtures" / "audit" / "demo_buggy.py"
    for spelling in ("--format", "--output-format"):
        r = _invoke("audit", f"{demo}:make_layer", "--checks", "lint,causality", spelling,
                    "concise")
        assert r.exit_code == 1, r.output
        out = r.output.splitlines()
        assert out[0].startswith(f"attncheck audit {demo}:make_layer (cpu, float32; ")
        lines = _check_lines(r.output)
        assert [line.split(":")[0] for line in lines] == ["fail  lint", "fail  causality"]
        assert "future leak: output at query" in lines[1] and "first (0, 1)" in lines[1]
        i = out.index("lint findings:")
        assert out[i + 1].startswith("    ") and ": ATT105 " in out[i + 1]
        assert out[i + 2] == "FAILED: 2 fail"


def _script() -> list[str]:
    exe = Path(sys.executable).with_name("attncheck")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "attncheck"]


def test_piped_check_output_does_not_depend_on_the_width(buggy_json):
    """A 40-column terminal setting changes nothing in piped output: it equals the in-process
    concise output (no width there) and keeps its long lines whole."""
    p = subprocess.run(_script() + ["check", BUGGY, *FAST], capture_output=True, text=True,
                       env=dict(os.environ, COLUMNS="40", NO_COLOR="1"), timeout=300)
    assert p.returncode == 1, p.stderr
    outs = [p.stdout, _invoke("check", BUGGY, *FAST, "--format", "concise").output]
    assert outs[0] == outs[1]
    assert max(len(line) for line in outs[0].splitlines()) > 100   # not wrapped at 40
    assert [line.split(" [")[0] for line in _check_lines(outs[0])] == \
        _expected_lines(buggy_json)


def test_lint_accepts_format_as_an_alias(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import torch\n\ndef f(q, k, v):\n"
                   "    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v\n")
    a = _invoke("lint", "--no-cache", "--isolated", "--format", "json", str(src))
    b = _invoke("lint", "--no-cache", "--isolated", "--output-format", "json", str(src))
    assert a.exit_code == b.exit_code == 1
    assert a.output == b.output and json.loads(a.output)[0]["code"] == "ATT101"
    rules = [_invoke("rules", spelling, "json") for spelling in ("--format", "--output-format")]
    assert rules[0].exit_code == rules[1].exit_code == 0
    assert rules[0].output == rules[1].output and json.loads(rules[0].output)[0]["code"] == "ATT000"


@pytest.mark.parametrize("args, option", [
    (["check", BUGGY, "--timeout", "-1"], "--timeout"),
    (["check", BUGGY, "--timeout", "nan"], "--timeout"),
    (["check", BUGGY, "--max-examples", "0"], "--max-examples"),
    (["check", BUGGY, "--seed", str(2**64)], "--seed"),
    (["audit", "--seed", str(-(2**63) - 1)], "--seed"),
    (["audit", "--timeout", "-1"], "--timeout"),
    (["audit", "--timeout", "nan"], "--timeout"),
    (["check", BUGGY, "--format", "xml"], "--output-format"),
    (["audit", "--output-format", "xml"], "--output-format"),
    (["lint", "--jobs", "-1"], "--jobs"),
])
def test_invalid_option_values_are_usage_errors(args, option):
    r = _invoke(*args)
    assert r.exit_code == 2, r.output
    assert "Invalid value for" in r.output and option in r.output
    assert "Traceback" not in r.output


def test_usage_errors_in_a_subprocess_are_exit_2_before_any_import_of_torch():
    code = ("import sys\nfrom attncheck.cli import main\n"
            "try:\n    main(['check', 'x.py:f', '--timeout', '-1'])\n"
            "except SystemExit as e:\n    code = e.code\n"
            "print(code, 'torch' in sys.modules)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.stdout.split() == ["2", "False"], p.stderr
    assert "Invalid value for '--timeout'" in p.stderr
    p = subprocess.run(_script() + ["check", "x.py:f", "--max-examples", "0"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Invalid value for '--max-examples'" in p.stderr
