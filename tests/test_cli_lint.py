"""`attncheck lint / rules / explain` through click's CliRunner and through the real entry point."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from engine_helpers import test_rules  # noqa: F401  (fixture)

from attncheck.cli import main
from attncheck.lint.rule import all_rules

SRC = "import torch\n\ny = x.softmax(1)\n"   # ATT991 at 3:5-3:17, fix: 1 -> -1


def run(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input)


@pytest.fixture
def one(tmp_path, test_rules):
    p = tmp_path / "m.py"
    p.write_text(SRC)
    (tmp_path / "ok.py").write_text("z = 1\n")
    return p


def test_concise_and_exit_codes(one):
    r = run("lint", "--isolated", str(one))
    assert r.exit_code == 1
    assert r.output.splitlines()[0] == f"{one}:3:5: ATT991 softmax over dim 1"
    assert "Found 1 finding(s) in 1 of 1 file(s)." in r.output
    assert run("lint", "--isolated", "--exit-zero", str(one)).exit_code == 0
    clean = run("lint", "--isolated", str(one.parent / "ok.py"))
    assert clean.exit_code == 0 and "All checks passed!" in clean.output
    assert run("lint", "--isolated", "--ignore", "ATT991", str(one)).exit_code == 0


def test_usage_errors_exit_2(one):
    r = run("lint", str(one.parent / "missing.py"), str(one))
    assert r.exit_code == 2 and "missing.py: no such file or directory" in r.output
    assert "ATT991" in r.output           # the other path is still linted
    assert run("lint", "--output-format", "xml", str(one)).exit_code == 2
    r = run("lint", "--select", "ATT1O1", str(one))
    assert r.exit_code == 2 and "invalid rule selector" in r.output


def test_json_schema(one):
    r = run("lint", "--isolated", "--output-format", "json", str(one))
    assert r.exit_code == 1
    data = json.loads(r.output)
    assert data == [{
        "path": str(one), "line": 3, "column": 5, "end_line": 3, "end_column": 17,
        "code": "ATT991", "name": "test-literal-dim", "severity": "warning",
        "message": "softmax over dim 1",
        "fix": {"message": "use dim=-1", "applicability": "safe",
                "edits": [{"line": 3, "column": 15, "end_line": 3, "end_column": 16,
                           "content": "-1"}]}}]


def test_github_format(one):
    r = run("lint", "--isolated", "--output-format", "github", str(one))
    assert r.output == (f"::warning file={one},line=3,col=5,endLine=3,endColumn=17,"
                        "title=ATT991 test-literal-dim::softmax over dim 1\n")


def test_full_format_shows_source(one):
    r = run("lint", "--isolated", "--output-format", "full", str(one))
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert lines[0] == f"{one}:3:5: ATT991 [warning] softmax over dim 1"
    assert any(line.endswith("│ y = x.softmax(1)") for line in lines)
    caret = next(line for line in lines if "^" in line)
    assert caret.split("│ ")[1] == "    " + "^" * 12
    assert "help: use dim=-1 (safe fix)" in r.output


def test_full_format_shows_the_finding_line_past_a_form_feed(tmp_path, test_rules):
    # a form feed does not end a line for Python (str.splitlines breaks there)
    p = tmp_path / "ff.py"
    p.write_bytes(b"import torch\n\x0c\ny = x.softmax(1)\n")
    r = run("lint", "--isolated", "--output-format", "full", str(p))
    assert r.exit_code == 1
    assert r.output.splitlines()[0] == f"{p}:3:5: ATT991 [warning] softmax over dim 1"
    assert any(line.endswith(" 3 │ y = x.softmax(1)") for line in r.output.splitlines())


def test_statistics(one, tmp_path):
    (tmp_path / "n.py").write_text("a = x.softmax(2)\nb = x.softmax(3)\n")
    r = run("lint", "--isolated", "--statistics", str(tmp_path))
    assert r.output.splitlines()[0].split() == ["3", "ATT991", "[*]", "test-literal-dim"]
    r = run("lint", "--isolated", "--statistics", "--output-format", "json", str(tmp_path))
    assert json.loads(r.output) == [{"code": "ATT991", "name": "test-literal-dim", "count": 3,
                                     "fixable": 3}]


def test_no_paths_means_current_directory(one, monkeypatch):
    monkeypatch.chdir(one.parent)
    r = run("lint", "--isolated")
    assert r.exit_code == 1 and r.output.startswith("m.py:3:5: ATT991 ")


def test_stdin(test_rules):
    r = run("lint", "--isolated", "-", input="y = x.softmax(1)\n")
    assert r.exit_code == 1 and r.output.startswith("-:1:5: ATT991 ")


def test_diff_fix_add_noqa(one):
    r = run("lint", "--isolated", "--diff", str(one))
    assert r.exit_code == 1
    assert "-y = x.softmax(1)\n+y = x.softmax(-1)\n" in r.output
    assert one.read_text() == SRC
    r = run("lint", "--isolated", "--fix", str(one))
    assert r.exit_code == 0 and "Fixed 1 finding(s)." in r.output
    assert one.read_text() == SRC.replace("(1)", "(-1)")
    one.write_text(SRC)
    r = run("lint", "--isolated", "--add-noqa", str(one))
    assert r.exit_code == 0 and "Added 1 noqa directive(s)." in r.output
    assert one.read_text().splitlines()[2] == "y = x.softmax(1)  # noqa: ATT991"
    assert run("lint", "--isolated", str(one)).exit_code == 0


# ------------------------------------------------------------------------- SARIF 2.1.0

_LEVELS = {"none", "note", "warning", "error"}


def validate_sarif(log: dict) -> None:
    """Structural checks of the SARIF 2.1.0 schema's required properties and enums."""
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-2.1.0.json")
    assert isinstance(log["runs"], list) and log["runs"]
    for run_ in log["runs"]:
        driver = run_["tool"]["driver"]
        assert isinstance(driver["name"], str) and driver["name"]
        rules = driver.get("rules", [])
        ids = [r["id"] for r in rules]
        assert len(ids) == len(set(ids))
        for r in rules:
            for key in ("shortDescription", "fullDescription"):
                assert isinstance(r[key]["text"], str) and r[key]["text"]
            assert r["defaultConfiguration"]["level"] in _LEVELS
        assert run_.get("columnKind", "utf16CodeUnits") in ("utf16CodeUnits", "unicodeCodePoints")
        for res in run_["results"]:
            assert isinstance(res["message"]["text"], str)
            assert res["level"] in _LEVELS
            if "ruleIndex" in res:
                assert ids[res["ruleIndex"]] == res["ruleId"]
            for loc in res["locations"]:
                phys = loc["physicalLocation"]
                assert isinstance(phys["artifactLocation"]["uri"], str)
                reg = phys["region"]
                assert reg["startLine"] >= 1 and reg["startColumn"] >= 1
                assert reg["endLine"] >= reg["startLine"]
                if reg["endLine"] == reg["startLine"]:
                    assert reg["endColumn"] >= reg["startColumn"]


def test_sarif(one):
    r = run("lint", "--isolated", "--output-format", "sarif", str(one))
    assert r.exit_code == 1
    log = json.loads(r.output)
    validate_sarif(log)
    run_ = log["runs"][0]
    (res,) = run_["results"]
    assert res["ruleId"] == "ATT991" and res["level"] == "warning"
    assert res["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 17}
    rules = {d["id"]: d for d in run_["tool"]["driver"]["rules"]}
    assert set(rules) == set(all_rules())
    att000 = rules["ATT000"]
    assert att000["name"] == "parse-error"
    assert att000["defaultConfiguration"]["level"] == "error"
    assert att000["fullDescription"]["text"].startswith("Reports a file that attncheck cannot read")
    assert rules["ATT993"]["defaultConfiguration"] == {"level": "note", "enabled": False}


def test_sarif_uri_is_relative_and_escaped(test_rules, tmp_path, monkeypatch):
    d = tmp_path / "my dir"
    d.mkdir()
    (d / "a b.py").write_text("y = x.softmax(1)\n")
    monkeypatch.chdir(tmp_path)
    log = json.loads(run("lint", "--isolated", "--output-format", "sarif", "my dir").output)
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert uri == {"uri": "my%20dir/a%20b.py"}


# ------------------------------------------------------------------------- rules / explain

def test_rules_table_and_json():
    r = run("rules", "--format", "json")
    assert r.exit_code == 0
    rows = json.loads(r.output)
    registry = all_rules()
    assert [x["code"] for x in rows] == list(registry)
    att000 = rows[0]
    assert att000 == {"code": "ATT000", "name": "parse-error", "severity": "error",
                      "default_enabled": True, "fix": "none",
                      "summary": registry["ATT000"].summary}
    table = run("rules")
    assert table.exit_code == 0 and "parse-error" in table.output and "ATT001" in table.output


def test_explain():
    r = run("explain", "ATT000")
    assert r.exit_code == 0 and r.output.startswith("# ATT000 parse-error\n")
    assert "## Use instead" in r.output
    assert run("explain", "parse-error").output == r.output
    bad = run("explain", "ATT9999")
    assert bad.exit_code == 2 and "unknown rule 'ATT9999'" in bad.output
    assert "ATT000, ATT001" in bad.output


# ------------------------------------------------------------------------- real entry point

def _script() -> str:
    exe = Path(sys.executable).with_name("attncheck")
    return str(exe) if exe.exists() else "attncheck"


def test_console_script_subprocess(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"import torch\nx = 1\x00\n")  # NUL bytes are checked in every file
    env = dict(os.environ, NO_COLOR="1")
    p = subprocess.run([_script(), "lint", "--isolated", str(bad)], capture_output=True,
                       text=True, env=env, timeout=60)
    assert p.returncode == 1, p.stderr
    assert p.stdout.splitlines()[0] == \
        f"{bad}:2:6: ATT000 cannot read source: source contains a NUL byte"
    p = subprocess.run([sys.executable, "-m", "attncheck", "lint", str(tmp_path / "nope.py")],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2 and "nope.py: no such file or directory" in p.stderr
    p = subprocess.run([sys.executable, "-m", "attncheck", "explain", "ATT001"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("# ATT001 internal-error")


def test_lint_never_imports_torch(tmp_path):
    (tmp_path / "m.py").write_text("import torch\ns = torch.softmax(q @ k.transpose(-2, -1), -1)\n")
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from attncheck.cli import main\n"
        "r = CliRunner().invoke(main, ['lint', '--isolated', '--select', 'ALL', "
        f"{str(tmp_path)!r}])\n"
        "assert r.exit_code in (0, 1), r.output\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "print('TORCH' if bad else 'CLEAN')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "CLEAN"


def test_lint_plain_output_never_imports_rich(tmp_path):
    """``concise`` and ``json`` output are plain text: rich (about 0.1 s of imports) is loaded
    only for ``--output-format full``."""
    (tmp_path / "m.py").write_text("import torch\ndef f(q, k, v):\n"
                                   "    s = q @ k.transpose(-2, -1)\n"
                                   "    return torch.softmax(s, dim=-1) @ v\n")
    code = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from attncheck.cli import main\n"
        "out = []\n"
        "for fmt in ('concise', 'json', 'full'):\n"
        "    r = CliRunner().invoke(main, ['lint', '--isolated', '--no-cache', '--select', "
        f"'ATT101', '--output-format', fmt, {str(tmp_path)!r}])\n"
        "    assert r.exit_code == 1, r.output\n"
        "    out.append([fmt, 'ATT101' in r.output, 'rich' in sys.modules])\n"
        "print(json.dumps(out))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == [["concise", True, False], ["json", True, False],
                                    ["full", True, True]]


def test_missing_path_never_reports_success(tmp_path):
    """A nonexistent path is exit 2 and the summary must not say 'All checks passed!'."""
    from click.testing import CliRunner

    from attncheck.cli import main

    res = CliRunner().invoke(main, ["lint", "--no-cache", str(tmp_path / "nope.py")])
    assert res.exit_code == 2
    assert "All checks passed" not in res.output
    assert "1 path(s) could not be linted" in res.output


def test_non_utf8_without_coding_line_names_the_byte(tmp_path):
    from attncheck.lint.engine import lint_paths

    f = tmp_path / "latin.py"
    f.write_bytes(b's = "caf\xe9"\n')
    [finding] = lint_paths([f], select=["ATT"]).findings
    assert finding.code == "ATT000"
    assert (finding.line, finding.col) == (1, 8)
    assert "not valid UTF-8 (byte 0xe9 at 1:9)" in finding.message


def test_rules_piped_is_one_line_per_rule():
    """Piped output (CliRunner is not a TTY): every rule on one line with its whole summary."""
    out = run("rules").output.splitlines()
    registry = all_rules()
    assert len(out) == len(registry)
    for line, (code, rule) in zip(out, registry.items()):
        assert line.startswith(code) and rule.name in line and line.endswith(rule.summary)


def test_selector_matching_no_rule_is_a_usage_error(tmp_path):
    """Regression: --select ATT9 (well-formed, matches nothing) silently linted with no rule."""
    f = tmp_path / "a.py"
    f.write_text("x = 1\n")
    r = run("lint", "--no-cache", "--select", "ATT9", str(f))
    assert r.exit_code == 2
    assert "rule selector 'ATT9' matches no rule" in r.output
    assert "All checks passed" not in r.output


def test_config_selector_matching_no_rule_names_the_config_file(tmp_path):
    """Like the other config errors, a selector that matches nothing names its file and key."""
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.attncheck]\nextend-select = ["ATT9"]\n')
    (tmp_path / "a.py").write_text("x = 1\n")
    r = run("lint", "--no-cache", str(tmp_path / "a.py"))
    assert r.exit_code == 2
    assert f"{config}: [tool.attncheck] extend-select: rule selector 'ATT9' matches no rule" \
        in r.output


def test_directory_without_python_files_warns_on_stderr(tmp_path):
    """Like ruff: a run that finds nothing to lint says so on stderr and still exits 0."""
    (tmp_path / "notes.txt").write_text("not python\n")
    r = run("lint", "--no-cache", "--isolated", str(tmp_path))
    assert r.exit_code == 0
    assert "warning: No Python files found under the given path(s)" in r.stderr
    assert "warning" not in r.stdout
    with_file = tmp_path / "a.py"
    with_file.write_text("x = 1\n")
    r = run("lint", "--no-cache", "--isolated", str(tmp_path))
    assert r.exit_code == 0 and "warning" not in r.stderr


def test_rule_registered_after_the_cache_manifest_was_written_is_selected(tmp_path, monkeypatch):
    """A run of cache hits reads rule codes from the cache's manifest; a rule registered in the
    process afterwards (the API's ``@register``) must still be selectable and run."""
    from engine_helpers import TEST_RULES

    from attncheck.lint.rule import _REGISTRY

    p = tmp_path / "m.py"
    p.write_text(SRC)
    cache = tmp_path / "cache"
    first = run("lint", "--isolated", "--cache-dir", str(cache), str(p))
    assert first.exit_code == 0, first.output  # the manifest is written without ATT991
    for rule in TEST_RULES:
        monkeypatch.setitem(_REGISTRY, rule.code, rule)
    r = run("lint", "--isolated", "--cache-dir", str(cache), str(p))
    assert r.exit_code == 1, r.output
    assert r.output.splitlines()[0] == f"{p}:3:5: ATT991 softmax over dim 1"
