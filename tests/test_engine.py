"""Engine: selection, prefilter, ATT000/ATT001, ordering, discovery, fixes (test-only rules)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from engine_helpers import test_rules  # noqa: F401  (fixture)
from hypothesis import given
from hypothesis import strategies as st

from attncheck.config import ConfigError
from attncheck.lint import engine
from attncheck.lint.engine import Layer, lint_paths, lint_source, resolve_selection
from attncheck.lint.finding import Edit, Fix
from attncheck.lint.fixes import apply_fixes


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


class _R:
    def __init__(self, code, default=True):
        self.code, self.default_enabled = code, default


REG = {c: _R(c, d) for c, d in [("ATT000", True), ("ATT001", True), ("ATT101", True),
                                 ("ATT102", True), ("ATT201", True), ("ATT202", True),
                                 ("ATT601", False), ("ATT602", False)]}


@pytest.mark.parametrize("layers, expected", [
    ([], {"ATT000", "ATT001", "ATT101", "ATT102", "ATT201", "ATT202"}),
    ([Layer(select=("ALL",))], set(REG)),
    ([Layer(select=("ATT2",))], {"ATT000", "ATT001", "ATT201", "ATT202"}),
    ([Layer(select=("ATT6",))], {"ATT000", "ATT001", "ATT601", "ATT602"}),
    ([Layer(ignore=("ATT1",))], {"ATT000", "ATT001", "ATT201", "ATT202"}),
    # more specific wins: select ATT101 beats ignore ATT1; ignore ATT201 beats select ATT2
    ([Layer(select=("ATT101", "ATT2"), ignore=("ATT1", "ATT201"))],
     {"ATT000", "ATT001", "ATT101", "ATT202"}),
    ([Layer(extend_select=("ATT601",))],
     {"ATT000", "ATT001", "ATT101", "ATT102", "ATT201", "ATT202", "ATT601"}),
    # ATT000 only goes with an explicit ATT0-or-longer ignore, never with ATT or ALL
    ([Layer(ignore=("ATT",))], {"ATT000", "ATT001"}),
    ([Layer(ignore=("ATT000",))], {"ATT001", "ATT101", "ATT102", "ATT201", "ATT202"}),
    # config layer then CLI layer: a CLI select starts afresh (the config's ignore no longer
    # applies); a CLI ignore applies on top of the config's select
    ([Layer(ignore=("ATT102",)), Layer(select=("ATT1",))],
     {"ATT000", "ATT001", "ATT101", "ATT102"}),
    ([Layer(select=("ATT1",)), Layer(ignore=("ATT102",))], {"ATT000", "ATT001", "ATT101"}),
])
def test_resolve_selection(layers, expected):
    assert resolve_selection(REG, layers) == expected


@given(st.lists(st.sampled_from(["ALL", "ATT", "ATT1", "ATT10", "ATT101", "ATT2", "ATT6",
                                 "ATT601"]), max_size=4),
       st.lists(st.sampled_from(["ATT", "ATT1", "ATT101", "ATT2", "ATT60", "ATT602"]),
                max_size=3))
def test_selection_properties(select, ignore):
    on = resolve_selection(REG, [Layer(select=tuple(select), ignore=tuple(ignore))])
    for code in REG:
        if code in ("ATT000", "ATT001"):
            continue
        s = [len(x) if x != "ALL" else 0 for x in select if x == "ALL" or code.startswith(x)]
        i = [len(x) for x in ignore if code.startswith(x)]
        expected = bool(s) and (not i or max(s) > max(i))
        assert (code in on) == expected, (code, select, ignore)
    assert {"ATT000", "ATT001"} <= on


def test_invalid_selector_is_config_error(tmp_path):
    with pytest.raises(ConfigError, match="invalid rule selector 'ATT1O1'"):
        lint_paths([tmp_path], select=["ATT1O1"])


def test_findings_and_prefilter(test_rules, tmp_path, monkeypatch):
    calls = []
    real = engine.cst.parse_module
    monkeypatch.setattr(engine.cst, "parse_module", lambda s: calls.append(s) or real(s))
    _write(tmp_path / "a.py", "y = x.softmax(1)\nz = x.softmax(-1)\n")
    _write(tmp_path / "b.py", "y = x.relu()\n")        # no token: not parsed
    _write(tmp_path / "c.txt", "y = x.softmax(1)\n")   # not a Python file
    res = lint_paths([tmp_path], select=["ATT991"], isolated=True)
    assert res.files == [str(tmp_path / "a.py"), str(tmp_path / "b.py")]
    assert res.parsed == 1 and len(calls) == 1
    assert [(f.line, f.col, f.end_col, f.code, f.message) for f in res.findings] == [
        (1, 4, 16, "ATT991", "softmax over dim 1")]
    assert res.exit_code() == 1 and res.exit_code(exit_zero=True) == 0


def test_info_rule_only_when_selected(test_rules):
    src = "y = x.softmax(1)\n"
    assert [f.code for f in lint_source(src)] == ["ATT991"]
    assert [f.code for f in lint_source(src, select=["ATT99"])] == ["ATT991", "ATT993"]
    assert [f.code for f in lint_source(src, select=["ALL"], ignore=["ATT991"])] == ["ATT993"]


@pytest.mark.parametrize("data, line, col, reason", [
    (b"import torch\ndef f(:\n    return x.softmax(1)\n", 2, 6, "SyntaxError"),
    (b"x = 1\n  y = x.softmax(1)\n", 2, 1, "IndentationError"),
    (b"y = x.softmax(1)\nz = 'caf\xe9'\n", 2, 8, "cannot decode byte 0xe9 as utf-8"),
    (b"y = x.softmax(1)\nz = 1\x00\n", 2, 5, "NUL byte"),
    (b"# -*- coding: nosuchcodec -*-\ny = x.softmax(1)\n", 1, 0, "encoding"),
])
def test_att000_bad_input(test_rules, tmp_path, data, line, col, reason):
    _write(tmp_path / "bad.py", data)
    _write(tmp_path / "good.py", "y = x.softmax(2)\n")
    res = lint_paths([tmp_path], select=["ATT991"], isolated=True)
    bad = [f for f in res.findings if f.path.endswith("bad.py")]
    assert [(f.code, f.line, f.col) for f in bad] == [("ATT000", line, col)]
    assert reason in bad[0].message
    good = [f for f in res.findings if f.path.endswith("good.py")]
    assert [(f.code, f.line) for f in good] == [("ATT991", 1)]
    assert res.exit_code() == 1


def test_latin1_cookie_decodes(test_rules):
    data = b"# -*- coding: latin-1 -*-\nz = 'caf\xe9'\ny = x.softmax(1)\n"
    res = engine.lint_bytes(data, "x.py", frozenset({"ATT000", "ATT991"}))
    assert [(f.code, f.line) for f in res.findings] == [("ATT991", 3)]


def test_att000_not_suppressed_by_noqa(test_rules):
    src = "y = x.softmax(1  # noqa\n# attncheck: file-ignore\n"
    assert [f.code for f in lint_source(src, select=["ATT991"])] == ["ATT000"]
    assert lint_source(src, select=["ATT991"], ignore=["ATT000"]) == []


def test_crashing_rule_reports_att001_and_keeps_others(test_rules, tmp_path):
    _write(tmp_path / "m.py", "boom()\ny = x.softmax(0)\n")
    _write(tmp_path / "n.py", "y = x.softmax(3)\n")
    res = lint_paths([tmp_path], select=["ATT991", "ATT992"], isolated=True)
    got = [(Path(f.path).name, f.line, f.code) for f in res.findings]
    assert got == [("m.py", 1, "ATT001"), ("m.py", 2, "ATT991"), ("n.py", 1, "ATT991")]
    msg = res.findings[0].message
    assert "ATT992 (test-crash)" in msg and "ZeroDivisionError" in msg
    assert res.exit_code() == 2


def test_output_order_is_deterministic(test_rules, tmp_path):
    for name in ["b.py", "a.py", "sub/c.py"]:
        _write(tmp_path / name, "a = x.softmax(2); b = x.softmax(1)\nc = x.softmax(0)\n")
    r1 = lint_paths([tmp_path / "sub", tmp_path], select=["ATT99"], isolated=True)
    r2 = lint_paths([tmp_path, tmp_path / "sub"], select=["ATT99"], isolated=True)
    assert r1.findings == r2.findings
    keys = [f.sort_key for f in r1.findings]
    assert keys == sorted(keys) and len(keys) == 3 * 6


def test_missing_path_is_error_others_linted(test_rules, tmp_path):
    _write(tmp_path / "a.py", "y = x.softmax(1)\n")
    res = lint_paths([tmp_path / "nope.py", tmp_path / "a.py"], isolated=True)
    assert res.errors == [f"{tmp_path / 'nope.py'}: no such file or directory"]
    assert [f.code for f in res.findings] == ["ATT991"]
    assert res.exit_code() == 2


def test_default_excludes_and_explicit_file(test_rules, tmp_path):
    for d in [".git", ".venv", "venv", "build", "dist", "__pycache__", "node_modules",
              "site-packages", ".tox", "pkg"]:
        _write(tmp_path / d / "m.py", "y = x.softmax(1)\n")
    res = lint_paths([tmp_path], isolated=True)
    assert res.files == [str(tmp_path / "pkg" / "m.py")]
    res = lint_paths([tmp_path / "build" / "m.py"], isolated=True)
    assert [f.code for f in res.findings] == ["ATT991"]


def test_stdin(test_rules):
    res = lint_paths(["-"], stdin="y = x.softmax(1)\n", isolated=True)
    assert [(f.path, f.line, f.code) for f in res.findings] == [("-", 1, "ATT991")]


def test_fix_writes_and_relints(test_rules, tmp_path):
    p = _write(tmp_path / "a.py", "y = x.softmax(1)  # keep\nz = x.softmax(-1)\n")
    res = lint_paths([p], fix=True, isolated=True)
    assert p.read_text() == "y = x.softmax(-1)  # keep\nz = x.softmax(-1)\n"
    assert res.fixed == 1 and res.findings == []
    assert res.diffs[str(p)][1] == p.read_text()


def test_diff_does_not_write(test_rules, tmp_path):
    p = _write(tmp_path / "a.py", "y = x.softmax(1)\n")
    res = lint_paths([p], diff=True, isolated=True)
    assert p.read_text() == "y = x.softmax(1)\n"
    assert res.diffs == {str(p): ("y = x.softmax(1)\n", "y = x.softmax(-1)\n")}


@given(st.data())
def test_apply_fixes_matches_reference(data):
    text = data.draw(st.text(alphabet="ab\n", min_size=1, max_size=30))
    # non-overlapping edits, drawn as sorted distinct offsets
    n = len(text)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), min_size=0, max_size=6, unique=True)))
    spans = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, 2)]

    def pos(off):
        line = text.count("\n", 0, off) + 1
        return line, off - (text.rfind("\n", 0, off) + 1)

    fixes, expected = [], text
    for a, b in reversed(spans):
        content = data.draw(st.text(alphabet="XY", max_size=3))
        expected = expected[:a] + content + expected[b:]
        (l1, c1), (l2, c2) = pos(a), pos(b)
        fixes.append(Fix("f", (Edit(l1, c1, l2, c2, content),), "safe"))
    out, applied = apply_fixes(text, fixes)
    assert out == expected and applied == len(spans)


def test_overlapping_fix_skipped():
    fixes = [Fix("a", (Edit(1, 0, 1, 3, "X"),), "safe"), Fix("b", (Edit(1, 2, 1, 4, "Y"),), "safe")]
    assert apply_fixes("abcdef", fixes) == ("Xdef", 1)


def test_run_rules_still_raises_on_syntax_error(test_rules):
    import libcst

    with pytest.raises(libcst.ParserSyntaxError):
        engine.run_rules("def f(:\n", "x.py", [test_rules[0]])
    assert [f.code for f in engine.run_rules("x.softmax(1)\n", "x.py", [test_rules[0]])] == \
        ["ATT991"]


def test_jobs_do_not_change_results(test_rules, tmp_path):
    """Processes over files: same findings, files and order as one process."""
    for i in range(24):
        body = "".join(f"y{j} = x.softmax({(i * j) % 5})\n" for j in range(i % 4 + 1))
        _write(tmp_path / f"d{i % 3}" / f"m{i}.py", body + ("boom()\n" if i == 7 else ""))
    _write(tmp_path / "broken.py", "y = x.softmax(1\n")
    one = lint_paths([tmp_path], select=["ATT99"], isolated=True, jobs=1)
    two = lint_paths([tmp_path], select=["ATT99"], isolated=True, jobs=2)
    assert two.findings == one.findings and two.files == one.files
    assert two.parsed == one.parsed == 25
    assert {f.code for f in one.findings} == {"ATT000", "ATT001", "ATT991", "ATT993"}


def test_attncheck_raise_env_reraises(test_rules, monkeypatch):
    monkeypatch.setenv("ATTNCHECK_RAISE", "1")
    with pytest.raises(ZeroDivisionError):
        lint_source("boom()\n", select=["ATT992"])


def test_engine_failure_is_att001_not_a_crash(test_rules, tmp_path, monkeypatch):
    _write(tmp_path / "a.py", "y = x.softmax(1)  # noqa: ATT993\n")
    _write(tmp_path / "b.py", "y = x.softmax(2)\n")

    def broken(findings, source):
        if "noqa" in source:
            raise RuntimeError("suppression bug")
        return findings

    monkeypatch.setattr(engine.suppression, "filter_findings", broken)
    res = lint_paths([tmp_path], isolated=True)
    assert [(Path(f.path).name, f.code) for f in res.findings] == [("a.py", "ATT001"),
                                                                   ("b.py", "ATT991")]
    assert "RuntimeError: suppression bug" in res.findings[0].message
    assert res.exit_code() == 2


def test_att000_for_every_unparseable_file_whatever_the_prefilter(tmp_path):
    """Regression: syntax errors in files (or blocks) with no attention tokens went unreported."""
    from attncheck.lint.engine import lint_paths

    (tmp_path / "plain.py").write_text("def f(:\n    pass\n")
    (tmp_path / "py2.py").write_text("import torch\nprint 'hi'\n")
    (tmp_path / "blanked.py").write_text(
        "import torch\n\n\ndef attn(q, k, v):\n"
        "    return torch.softmax(q @ k.transpose(-2, -1) * q.size(-1) ** -0.5, dim=-1) @ v\n\n\n"
        "def other(x):\n    return x +* 2\n")
    (tmp_path / "pep695.py").write_text("def ident[T](x: T) -> T:\n    return x\n")
    got = {(f.path.rsplit("/", 1)[-1], f.line, f.code) for f in lint_paths([tmp_path]).findings}
    assert got == {("plain.py", 1, "ATT000"), ("py2.py", 2, "ATT000"), ("blanked.py", 9, "ATT000")}
