"""Autofix for ATT301 (dim=-1), ATT501 (gate dropout on training) and ATT202 (move the diagonal).

Every fix is applied through the engine (``lint_paths(fix=True, unsafe_fixes=True)``) to a tmp
copy of its fixtures; the test asserts the exact fixed lines, that nothing else changed, that the
rule no longer fires (except on sites documented as unfixable), and that the file still parses
(libcst and ast) with unchanged indentation.
"""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

import libcst
import pytest
from click.testing import CliRunner

from attncheck.cli import main
from attncheck.lint.engine import lint_paths, lint_source
from attncheck.lint.fixes import apply_fixes

ROOT = Path(__file__).resolve().parent.parent
BUGGY = ROOT / "fixtures" / "lint" / "buggy"
CASES = ROOT / "fixtures" / "cases"

# (fixture, code, {line: exact fixed text}, lines still flagged after the fix (no fix offered))
FIXED = [
    (BUGGY / "softmax_wrong_dim.py", "ATT301", {
        17: "        self.softmax = nn.Softmax(dim=-1)",
        36: "        p = F.softmax(scores, dim=-1)  # expect: ATT301",
        43: "    w = F.softmax(w, dim=-1)  # expect: ATT301",
        50: "    attn = sim.softmax(dim=-1)  # expect: ATT301",
        67: "        att = att.softmax(-1)  # expect: ATT301",
    }, set()),
    (CASES / "b20_softmax_over_batch_dim.py", "ATT301", {
        22: "        self.softmax = nn.Softmax(dim=-1)",
    }, set()),
    (BUGGY / "softmax_dim_after_where.py", "ATT301", {
        31: "        attn_weights = nn.functional.softmax(attn_weights.float(), dim=-1)  # expect: ATT301",
    }, set()),
    (BUGGY / "textbook_bmm_softmax_dim.py", "ATT301", {
        25: "        w_ = torch.nn.functional.softmax(w_, dim=-1)  # expect: ATT301",
    }, set()),
    (BUGGY / "dropout_in_eval.py", "ATT501", {
        20: "        w = F.dropout(w, p=self.dropout, training=self.training)  # expect: ATT501",
        31: "        w = F.dropout(w, self.p, training=self.training)  # expect: ATT501",
        45: "        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=self.dropout "
            "if self.training else 0.0, is_causal=True)  # expect: ATT501",
        55: "        return flash_attn_func(q, k, v, dropout_p=self.config.attention_dropout if self.training "
            "else 0.0, causal=True)  # expect: ATT501",
        65: "        return F.scaled_dot_product_attention(q, k, v, dropout_p=p if self.training else 0.0)"
            "  # expect: ATT501",
    }, set()),
    (BUGGY / "dropout_training_true_eager.py", "ATT501", {
        14: "    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)"
            "  # expect: ATT501",
    }, set()),
    (BUGGY / "textbook_functional_dropout.py", "ATT501", {
        37: "        weights = F.dropout(weights, p=self.dropout.p, training=self.training)  # expect: ATT501",
    }, set()),
    (CASES / "b26_sdpa_dropout_in_eval.py", "ATT501", {
        28: "        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, "
            "is_causal=True)  # expect: ATT501",
    }, set()),
    (BUGGY / "mask_diagonal_masked_fill.py", "ATT202", {
        12: "    upper = torch.triu(torch.ones(T, T, dtype=torch.bool, device=q.device), diagonal=1)",
        20: "    r, c = torch.triu_indices(T, T, offset=1)",
    }, {29, 42}),  # a comparison-built mask; a register_buffer mask built in __init__
    (BUGGY / "mask_diagonal_keep_mask.py", "ATT202", {
        10: "    keep = torch.tril(torch.ones(L, L, dtype=torch.bool, device=q.device), diagonal=0)",
    }, {20, 30}),  # a comparison-built mask; a mask built in a helper function
    (CASES / "b09_causal_mask_masks_diagonal.py", "ATT202", {
        17: "    rows, cols = torch.triu_indices(L, L, offset=1)",
    }, set()),
]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


@pytest.mark.parametrize("path, code, expected, left", FIXED, ids=lambda x: x.name if isinstance(x, Path) else None)
def test_unsafe_fix_applies_and_relints_clean(tmp_path, path, code, expected, left):
    src = path.read_text(encoding="utf-8")
    target = tmp_path / path.name
    shutil.copy(path, target)
    res = lint_paths([target], select=[code], fix=True, unsafe_fixes=True, isolated=True)
    assert res.fixed == len(expected)
    new = target.read_text(encoding="utf-8")
    old_lines, new_lines = src.splitlines(), new.splitlines()
    assert len(old_lines) == len(new_lines)
    changed = {i + 1: b for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b}
    assert changed == expected
    assert [_indent(x) for x in old_lines] == [_indent(x) for x in new_lines]
    libcst.parse_module(new)
    ast.parse(new)
    assert {f.line for f in lint_source(new, str(target), select=[code]) if f.code == code} == left
    # the remaining findings carry no fix (nothing left that --fix would change)
    assert all(f.fix is None for f in res.findings if f.code == code)


@pytest.mark.parametrize("path, code, expected, left", FIXED, ids=lambda x: x.name if isinstance(x, Path) else None)
def test_fix_without_unsafe_changes_nothing(tmp_path, path, code, expected, left):
    target = tmp_path / path.name
    shutil.copy(path, target)
    res = lint_paths([target], select=[code], fix=True, isolated=True)
    assert res.fixed == 0
    assert target.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
    fixable = [f for f in res.findings if f.code == code and f.fix is not None]
    assert len(fixable) == len(expected)
    assert all(f.fix.applicability == "unsafe" for f in fixable)


@pytest.mark.parametrize("path, code, expected", [x[:3] for x in FIXED[::4]] + [FIXED[-2][:3]],
                         ids=lambda x: x.name if isinstance(x, Path) else None)
def test_cli_diff_shows_unsafe_fixes_only_with_flag(tmp_path, path, code, expected):
    target = tmp_path / path.name
    shutil.copy(path, target)
    runner = CliRunner()
    out = runner.invoke(main, ["lint", "--isolated", "--no-cache", "--select", code, "--diff", "--unsafe-fixes",
                               str(target)])
    assert out.exit_code == 1, out.output
    src_lines = path.read_text(encoding="utf-8").splitlines()
    for line, text in expected.items():
        assert f"-{src_lines[line - 1]}\n" in out.output
        assert f"+{text}\n" in out.output
    assert target.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
    safe_only = runner.invoke(main, ["lint", "--isolated", "--no-cache", "--select", code, "--diff", str(target)])
    assert "+" + next(iter(expected.values())) not in safe_only.output


def _fix_src(src: str, code: str) -> tuple[str, list]:
    fs = [f for f in lint_source(src, "t.py", select=[code]) if f.code == code]
    return apply_fixes(src, [f.fix for f in fs if f.fix])[0], fs


_HEAD = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


@pytest.mark.parametrize("build, fixed", [
    ("torch.ones(T, T, dtype=torch.bool).triu()", "torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)"),
    ("torch.ones(T, T, dtype=torch.bool).triu(0)", "torch.ones(T, T, dtype=torch.bool).triu(1)"),
    ("torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=0)",
     "torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)"),
    ("~torch.ones(T, T, dtype=torch.bool).tril(-1)", "~torch.ones(T, T, dtype=torch.bool).tril(0)"),
])
def test_att202_method_and_keyword_forms(build, fixed):
    src = _HEAD + ("def f(q, k, v):\n    T = q.shape[-2]\n    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                   f"    m = {build}\n    s = s.masked_fill(m, float('-inf'))\n    return s.softmax(-1) @ v\n")
    new, fs = _fix_src(src, "ATT202")
    assert len(fs) == 1 and fs[0].fix is not None
    assert f"    m = {fixed}\n" in new
    assert _fix_src(new, "ATT202")[1] == []
    assert not [f for f in lint_source(new, "t.py") if f.code.startswith("ATT2")]


def test_att301_nn_softmax_without_dim_and_ambiguous_attribute():
    cls = ("class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.softmax = nn.Softmax({arg})\n{extra}\n"
           "    def forward(self, q, k, v):\n        s = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])\n"
           "        return torch.bmm(self.softmax(s), v)\n")
    new, fs = _fix_src(_HEAD + cls.format(arg="", extra=""), "ATT301")
    assert len(fs) == 1 and "        self.softmax = nn.Softmax(dim=-1)\n" in new
    assert _fix_src(new, "ATT301")[1] == []
    # two assignments of self.softmax: the edit site is ambiguous, no fix
    extra = "    def reset(self):\n        self.softmax = nn.Softmax(dim=1)\n"
    src = _HEAD + cls.format(arg="dim=1", extra=extra)
    fs = [f for f in lint_source(src, "t.py", select=["ATT301"])]
    assert len(fs) == 1 and fs[0].fix is None


def test_att501_no_fix_without_a_training_flag():
    # a free function without a `module` parameter: nothing to read the flag from, and
    # training=True written out there is deliberate (not reported)
    src = _HEAD + ("def attn(q, k, p):\n    w = torch.softmax(q @ k.transpose(-2, -1) * q.size(-1) ** -0.5, -1)\n"
                   "    return F.dropout(w, p=p, training=True)\n")
    assert lint_source(src, "t.py", select=["ATT501"]) == []
    # its probability defaults to a constant and nothing passes a training flag: no fix either
    src = _HEAD + ("def attn(q, k, p=0.1):\n    w = torch.softmax(q @ k.transpose(-2, -1) * q.size(-1) ** -0.5, -1)\n"
                   "    return F.dropout(w, p)\n")
    fs = lint_source(src, "t.py", select=["ATT501"])
    assert len(fs) == 1 and fs[0].fix is None
    # a literal probability is gated as written
    src = _HEAD + ("class A(nn.Module):\n    def forward(self, q, k, v):\n"
                   "        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)\n")
    new, fs = _fix_src(src, "ATT501")
    assert len(fs) == 1
    assert "(q, k, v, dropout_p=0.1 if self.training else 0.0)\n" in new
    assert _fix_src(new, "ATT501")[1] == []
