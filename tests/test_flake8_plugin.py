"""The flake8 entry point reports what ``attncheck lint`` reports: same codes, lines, columns."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attncheck.flake8_plugin import Flake8Plugin, lint_lines
from attncheck.lint.engine import lint_source
from attncheck.lint.rule import all_rules

ROOT = Path(__file__).resolve().parent.parent
BUGGY_DIR = ROOT / "fixtures" / "lint" / "buggy"
ENGINE_CODES = {"ATT000", "ATT001"}

BUGGY = '''\
import math

import torch


def attention(q, k, v, mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(mask == 0, -1e9)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v
'''

needs_flake8 = pytest.mark.skipif(shutil.which("flake8") is None and
                                  not (Path(sys.executable).parent / "flake8").exists(),
                                  reason="flake8 not installed")


def _flake8(*args: str, cwd: Path = ROOT) -> list[tuple[str, int, int, str]]:
    exe = Path(sys.executable).parent / "flake8"
    cmd = [str(exe) if exe.exists() else "flake8", "--isolated", "-j", "1",
           "--format=%(path)s\t%(row)d\t%(col)d\t%(code)s", *args]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    out = []
    for line in proc.stdout.splitlines():
        path, row, col, code = line.split("\t")
        out.append((Path(path).as_posix(), int(row), int(col), code))
    return out


def _attncheck_json(*args: str, cwd: Path = ROOT) -> list[dict]:
    cmd = [sys.executable, "-m", "attncheck", "lint", "--isolated", "--output-format", "json",
           *args]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _buggy_files() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in BUGGY_DIR.glob("*.py"))


@needs_flake8
def test_flake8_matches_attncheck_lint_on_buggy_fixtures():
    files = _buggy_files()
    if not files:
        pytest.skip("no buggy lint fixtures yet")
    lint = _attncheck_json(*files)
    unparsable = {f["path"] for f in lint if f["code"] in ENGINE_CODES}
    expected = sorted((f["path"], f["line"], f["column"], f["code"]) for f in lint
                      if f["path"] not in unparsable)
    assert expected, "the buggy fixtures raise findings"
    got = sorted(t for t in _flake8("--select", "ATT", *files) if t[0] not in unparsable)
    assert got == expected


def test_plugin_in_process_positions_equal_lint_source():
    got = [(line, col, text.split()[0]) for line, col, text, _ in
           Flake8Plugin(None, BUGGY.splitlines(True), "x.py").run()]
    want = [(f.line, f.col, f.code) for f in lint_source(BUGGY, "x.py")]
    assert got == want
    assert (8, 43, "ATT204") in got


def _flake8_inprocess(files, capsys, **options) -> list[tuple[str, int]]:
    """flake8's documented legacy API, in this process (plugins load from entry points)."""
    from flake8.api import legacy

    capsys.readouterr()
    guide = legacy.get_style_guide(format="%(path)s\t%(row)d\t%(col)d\t%(code)s", **options)
    guide.check_files([str(f) for f in files])
    out = capsys.readouterr().out
    return sorted((Path(ln.split("\t")[0]).name, int(ln.split("\t")[1]))
                  for ln in out.splitlines() if ln.count("\t") == 3)


@pytest.mark.skipif("ATT204" not in all_rules(), reason="ATT204 not registered yet")
def test_noqa_is_flake8s_and_attncheck_comments_are_honoured(tmp_path, capsys):
    pytest.importorskip("flake8")
    (tmp_path / "plain.py").write_text(BUGGY)
    line = next(f.line for f in lint_source(BUGGY) if f.code == "ATT204")
    lines = BUGGY.splitlines(True)
    noqa = lines.copy()
    noqa[line - 1] = noqa[line - 1].rstrip("\n") + "  # noqa: ATT204\n"
    (tmp_path / "noqa.py").write_text("".join(noqa))
    ign = lines.copy()
    ign[line - 1] = ign[line - 1].rstrip("\n") + "  # attncheck: ignore[ATT204]\n"
    (tmp_path / "ignored.py").write_text("".join(ign))
    (tmp_path / "fileign.py").write_text("# attncheck: file-ignore[ATT2]\n" + BUGGY)

    files = [tmp_path / n for n in ("plain.py", "noqa.py", "ignored.py", "fileign.py")]
    assert _flake8_inprocess(files, capsys, select=["ATT204"]) == [("plain.py", line)]
    # noqa is applied by flake8 itself: --disable-noqa brings the finding back
    assert _flake8_inprocess(files, capsys, select=["ATT204"], disable_noqa=True) == [
        ("noqa.py", line), ("plain.py", line)]
    # the plugin itself leaves # noqa alone but applies attncheck's own comments
    assert [f.code for f in lint_lines(noqa, "noqa.py")].count("ATT204") == 1
    assert "ATT204" not in [f.code for f in lint_lines(ign, "ignored.py")]


def test_attncheck_select_enables_default_off_rules():
    registry = all_rules()
    off = [c for c, r in registry.items() if not r.default_enabled]
    if not off:
        pytest.skip("no default-off rule registered yet")
    Flake8Plugin.parse_options(type("O", (), {"attncheck_select": ["ALL"]})())
    try:
        assert Flake8Plugin.select == ("ALL",)
        everything = {f.code for f in lint_lines(BUGGY.splitlines(True), "x.py", ["ALL"])}
        default = {f.code for f in lint_lines(BUGGY.splitlines(True), "x.py")}
        assert default <= everything
        assert not (default & set(off))
        if "ATT601" in registry:  # manual softmax(q·kᵀ)·v: unfused-attention (info, off)
            assert "ATT601" in everything
    finally:
        Flake8Plugin.parse_options(type("O", (), {"attncheck_select": []})())
    assert Flake8Plugin.select is None


def test_unparsable_file_yields_nothing():
    assert list(Flake8Plugin(None, ["def f(:\n", "  softmax(q @ k)\n"], "bad.py").run()) == []
