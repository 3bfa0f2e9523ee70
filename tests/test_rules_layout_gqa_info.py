"""Static rules ATT302, ATT403, ATT404, ATT502 (default on) and ATT601–ATT604 (info, off).

The buggy fixtures with ``# expect:`` lines are checked by tests/test_fixtures_lint.py; here:
the info rules on their own fixture (``# info:`` lines, linted with ``select=["ATT6"]``), the
default selection, every autofix applied to its fixtures (re-lint → zero findings of that rule,
still parseable, only the fixed span changed), properties of the layout / GQA / softmax
analyses over generated code, and the numerical facts the rule pages state (torch).
"""
from __future__ import annotations

import io
import re
import textwrap
import tokenize
from pathlib import Path

import libcst
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attncheck.lint.analysis.layout import layout_of_axes
from attncheck.lint.engine import lint_paths, lint_source
from attncheck.lint.fixes import apply_fixes
from attncheck.lint.rule import all_rules

ROOT = Path(__file__).resolve().parent.parent
BUGGY = ROOT / "fixtures" / "lint" / "buggy"
CASES = ROOT / "fixtures" / "cases"
DEFAULT_ON = ("ATT302", "ATT403", "ATT404", "ATT502")
INFO = ("ATT601", "ATT602", "ATT603", "ATT604")
_INFO_RE = re.compile(r"#\s*info:\s*(.*)$")


def _info_expectations(source: str) -> set[tuple[int, str]]:
    out = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            m = _INFO_RE.search(tok.string)
            if m:
                out |= {(tok.start[0], c.strip()) for c in m.group(1).split(",")}
    return out


def _pairs(findings, codes=None) -> set[tuple[int, str]]:
    return {(f.line, f.code) for f in findings if codes is None or f.code in codes}


def test_registry_metadata():
    reg = all_rules()
    for code in DEFAULT_ON:
        assert reg[code].default_enabled, code
    assert reg["ATT302"].severity == reg["ATT502"].severity == "warning"
    assert reg["ATT403"].severity == reg["ATT404"].severity == "error"
    for code in INFO:
        assert not reg[code].default_enabled and reg[code].severity == "info", code


def test_info_rules_on_their_fixture_exactly():
    path = BUGGY / "info_performance.py"
    src = path.read_text(encoding="utf-8")
    expected = _info_expectations(src)
    assert {c for _, c in expected} == set(INFO)
    assert _pairs(lint_source(src, str(path), select=["ATT6"])) == expected
    # off by default: the default selection reports none of them
    assert not _pairs(lint_source(src, str(path)), set(INFO))


def test_b14_fully_masked_row_raises_att603_only_when_selected():
    path = CASES / "b14_fully_masked_row_nan.py"
    src = path.read_text(encoding="utf-8")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if 'float("-inf")' in t)
    assert (line, "ATT603") in _pairs(lint_source(src, str(path), select=["ATT6"]))
    assert not _pairs(lint_source(src, str(path)), set(INFO))


def test_textbook_mha_is_clean_by_default_but_has_info_findings():
    path = ROOT / "fixtures" / "lint" / "correct" / "textbook_mha.py"
    src = path.read_text(encoding="utf-8")
    assert lint_source(src, str(path)) == []
    info = _pairs(lint_source(src, str(path), select=["ATT6"]))
    repeat_line = next(i for i, t in enumerate(src.splitlines(), 1) if ".repeat(1, self.num_heads" in t)
    assert (repeat_line, "ATT602") in info
    # the weights are returned: ATT601 must not claim SDPA could replace it
    assert not {c for _, c in info} & {"ATT601"}


FIX_FILES = [
    (BUGGY / "unstable_softmax.py", "ATT302"),
    (BUGGY / "gqa_head_mapping.py", "ATT403"),
    (CASES / "b31_gqa_tile_vs_interleave.py", "ATT403"),
    (CASES / "b39_naive_softmax_overflow.py", "ATT302"),
    (BUGGY / "info_performance.py", "ATT602"),
]


@pytest.mark.parametrize("path, code", FIX_FILES, ids=lambda p: p.name if isinstance(p, Path) else p)
def test_fixes_apply_and_relint_clean(tmp_path, path, code):
    src = path.read_text(encoding="utf-8")
    findings = [f for f in lint_source(src, str(path), select=[code]) if f.code == code]
    fixable = [f for f in findings if f.fix is not None]
    assert fixable, f"{code} has no fix on {path.name}"
    assert all(f.fix.applicability == "unsafe" for f in fixable)
    new, applied = apply_fixes(src, [f.fix for f in fixable])
    assert applied == len(fixable)
    libcst.parse_module(new)
    compile(new, str(path), "exec")
    left = {(f.line, f.code) for f in lint_source(new, str(path), select=[code])}
    assert left == {(f.line, f.code) for f in findings if f.fix is None}
    # only the fixed lines changed (same line count: every fix stays on its line)
    old_lines, new_lines = src.splitlines(), new.splitlines()
    assert len(old_lines) == len(new_lines)
    changed = {i + 1 for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b}
    assert changed == {f.line for f in fixable}
    # the engine path: --fix --unsafe-fixes writes the same text
    target = tmp_path / path.name
    target.write_text(src, encoding="utf-8")
    res = lint_paths([target], select=[code], fix=True, unsafe_fixes=True, isolated=True)
    assert target.read_text(encoding="utf-8") == new
    assert res.fixed >= 1


def test_fix_contents():
    src = (CASES / "b31_gqa_tile_vs_interleave.py").read_text(encoding="utf-8")
    fixed, _ = apply_fixes(src, [f.fix for f in lint_source(src, "b31.py") if f.fix])
    assert "k = k.repeat_interleave(group, dim=1)" in fixed
    src = (CASES / "b39_naive_softmax_overflow.py").read_text(encoding="utf-8")
    fixed, _ = apply_fixes(src, [f.fix for f in lint_source(src, "b39.py") if f.fix])
    assert "weights = torch.softmax(scores, dim=-1)" in fixed


# --------------------------------------------------------------------------- properties

_ATOMS = st.permutations(["B", "H", "L", "d"])


@given(_ATOMS)
def test_layout_of_axes_permutations(perm):
    axes = tuple((a,) for a in perm)
    got = layout_of_axes(axes)
    if perm[-1] != "d":
        assert got is None
    elif perm.index("H") < perm.index("L"):
        assert got == "BHLD"
    else:
        assert got == "BLHD"


_GQA_TMPL = '''import torch.nn.functional as F


def f(q, k, v, n_rep):
    k = k.repeat({counts})
    return F.scaled_dot_product_attention(q, k, v)
'''


@given(st.integers(3, 4), st.integers(0, 3), st.sampled_from(["n_rep", "self_groups", "2", "top_k"]))
def test_gqa_repeat_fires_only_on_the_heads_axis_with_a_group_factor(rank, pos, count):
    pos = pos % rank
    expr = {"self_groups": "q.size(1) // k.size(1)"}.get(count, count)
    counts = ["1"] * rank
    counts[pos] = expr
    src = _GQA_TMPL.format(counts=", ".join(counts))
    fired = _pairs(lint_source(src, "g.py", select=["ATT403"]))
    group = count in ("n_rep", "self_groups")
    want = group and ((rank == 4 and pos == 1) or (rank == 3 and pos == 0))
    assert fired == ({(5, "ATT403")} if want else set())


_CAT_TMPL = '''import torch
import torch.nn.functional as F


def f(q, k, v, n_rep):
    k = {expand}
    return F.scaled_dot_product_attention(q, k, v)
'''


@pytest.mark.parametrize("expand,tiled", [
    ("torch.cat([k] * n_rep, dim=1)", True),        # [k0, k1, k0, k1]: like .repeat
    ("torch.cat([k for _ in range(n_rep)], dim=1)", True),
    ("torch.cat((k,) * n_rep, 1)", True),
    ("torch.cat([k] * n_rep, dim=2)", False),       # the sequence axis: not a head mapping
    ("k.repeat_interleave(n_rep, dim=1)", False),   # [k0, k0, k1, k1]: grouped-query order
])
def test_gqa_heads_tiled_with_cat(expand, tiled):
    fired = _pairs(lint_source(_CAT_TMPL.format(expand=expand), "g.py", select=["ATT403"]))
    assert fired == ({(6, "ATT403")} if tiled else set())


_EXPAND_TMPL = '''def repeat_kv(x, n_rep):
    b, h, s, d = x.shape
    x = x[{index}].expand({sizes})
    return x.reshape(b, h * n_rep, s, d)
'''


@given(st.integers(1, 4))
def test_gqa_expand_fires_iff_group_axis_before_heads(p):
    index = ", ".join([":"] * p + ["None"] + [":"] * (4 - p))
    sizes = ["b", "h", "s", "d"]
    sizes.insert(p, "n_rep")
    src = _EXPAND_TMPL.format(index=index, sizes=", ".join(sizes))
    fired = _pairs(lint_source(src, "e.py", select=["ATT403"]))
    assert fired == ({(4, "ATT403")} if p == 1 else set())


_SOFTMAX_FORMS = {
    "exp(s)/sum": ("torch.exp(s) / torch.exp(s).sum(dim=-1, keepdim=True)", True),
    "method exp": ("s.exp() / s.exp().sum(-1, keepdim=True)", True),
    "max subtracted": ("torch.exp(s - s.amax(-1, keepdim=True)) / torch.exp(s - s.amax(-1, keepdim=True)).sum(-1, keepdim=True)", False),
    "logsumexp": ("torch.exp(s - torch.logsumexp(s, -1, keepdim=True))", False),
    "softmax": ("torch.softmax(s, dim=-1)", False),
}


@given(st.sampled_from(sorted(_SOFTMAX_FORMS)), st.booleans())
def test_unstable_softmax_forms(form, on_scores):
    expr, unstable = _SOFTMAX_FORMS[form]
    s = "q @ k.transpose(-2, -1) * q.size(-1) ** -0.5" if on_scores else "x * 2.0"
    src = f"import torch\n\n\ndef f(q, k, v, x):\n    s = {s}\n    w = {expr}\n    return w @ v\n"
    fired = _pairs(lint_source(src, "s.py", select=["ATT302"]))
    assert fired == ({(6, "ATT302")} if unstable and on_scores else set())


def test_layout_reverse_and_unknown():
    src = '''import torch.nn.functional as F
from flash_attn import flash_attn_func


def kernel(q, k, v):
    return flash_attn_func(q, k, v), F.scaled_dot_product_attention(q, k, v)


def bhld(x, B, L, num_heads, head_dim):
    q = x.view(B, L, num_heads, head_dim).transpose(1, 2)
    return F.scaled_dot_product_attention(q, q, q), flash_attn_func(q, q, q)
'''
    # parameters have no known layout: nothing on line 6; (B, H, L, d) is right for SDPA only
    assert _pairs(lint_source(src, "l.py", select=["ATT404"])) == {(11, "ATT404")}


def test_state_mutation_decisions():
    src = '''import torch.nn as nn


class A(nn.Module):
    def __init__(self, config, window=4):
        super().__init__()
        self.attention_dropout = config.attention_dropout
        self.window = window
        self.kv_cache = None
        self._seen_tokens = 0
        self.step = 0

    def forward(self, x):
        self.attention_dropout = 0.0
        self.window += 1
        self.kv_cache = x
        self._seen_tokens += x.shape[1]
        self.step = self.step + 1
        return x

    def reset(self):
        self.attention_dropout = 0.5


class Latch(nn.Module):
    def __init__(self, expand=True):
        super().__init__()
        self.expand = expand
        self.map = False

    def forward(self, x):
        if self.expand:
            x = x * 2
            self.expand = False
        if self.map:
            return x
        else:
            self.map = True
        self.training = True
        return x
'''
    assert _pairs(lint_source(src, "s.py", select=["ATT502"])) == {(14, "ATT502"), (15, "ATT502"), (39, "ATT502")}


# --------------------------------------------------------------------------- the facts the pages state

def test_tiling_and_interleaving_differ_and_hf_repeat_kv_interleaves():
    torch.manual_seed(0)
    k = torch.randn(2, 2, 5, 4)  # (B, H_kv, L, d)
    n_rep = 3
    inter = k.repeat_interleave(n_rep, dim=1)
    tiled = k.repeat(1, n_rep, 1, 1)
    hf = k[:, :, None].expand(2, 2, n_rep, 5, 4).reshape(2, 6, 5, 4)
    wrong = k[:, None].expand(2, n_rep, 2, 5, 4).reshape(2, 6, 5, 4)
    torch.testing.assert_close(hf, inter)
    torch.testing.assert_close(wrong, tiled)
    for h in range(6):  # query head h reads kv head h // n_rep (interleave) vs h % H_kv (tile)
        torch.testing.assert_close(inter[:, h], k[:, h // n_rep])
        torch.testing.assert_close(tiled[:, h], k[:, h % 2])
    assert not torch.equal(inter, tiled)


def test_naive_softmax_overflows_where_torch_softmax_does_not():
    s = torch.tensor([[100.0, 1.0, 0.0]])
    naive = torch.exp(s) / torch.exp(s).sum(dim=-1, keepdim=True)
    assert torch.isnan(naive).any()
    torch.testing.assert_close(torch.softmax(s, dim=-1).sum(-1), torch.ones(1))


def test_fully_masked_row_nan_and_finfo_min_is_finite():
    s = torch.zeros(1, 3)
    block = torch.ones(1, 3, dtype=torch.bool)
    assert torch.isnan(torch.softmax(s.masked_fill(block, float("-inf")), -1)).all()
    assert torch.isfinite(torch.softmax(s.masked_fill(block, torch.finfo(s.dtype).min), -1)).all()


def test_mask_expand_equals_repeat():
    mask = torch.rand(2, 1, 4, 4) > 0.5
    torch.testing.assert_close(mask.expand(-1, 3, -1, -1), mask.repeat(1, 3, 1, 1))


def test_att403_tile_message_names_the_call_and_parenthesizes_the_group():
    """Regression: the torch.tile form read 'ktorch.tile(...)' and 'h // a // b' (wrong maths)."""
    src = ("import torch\n\n"
           "def attend(q, k, v, num_heads, num_kv_heads):\n"
           "    k = torch.tile(k, (1, num_heads // num_kv_heads, 1, 1))\n"
           "    return torch.softmax(q @ k.transpose(-2, -1) * q.size(-1) ** -0.5, dim=-1) @ v\n")
    msgs = [f.message for f in lint_source(src, "t.py") if f.code == "ATT403"]
    assert len(msgs) == 1
    assert msgs[0].startswith("torch.tile(k, ...) tiles the key/value heads by num_heads // num_kv_heads")
    assert "maps it to h // (num_heads // num_kv_heads)" in msgs[0]


_LATCH = '''
import torch.nn as nn


class Layer(nn.Module):
    def __init__(self, causal=False):
        super().__init__()
        self.ever_training = False
        self.causal = causal

    def forward(self, x, mask=None):
        {body}
        return x
'''


@pytest.mark.parametrize("body, expected", [
    ("if self.training:\n            self.ever_training = True", []),     # a sticky record of the mode
    ("if not self.training and self.causal:\n            self.ever_training = True", []),
    ("self.ever_training = True", [12]),                                    # unconditional
    ("if mask is None:\n            self.causal = True", [13]),            # an input decides it
    ("if self.causal:\n            self.training = False", [13]),          # self.training: always
])
def test_one_way_flag_set_from_the_modules_own_state(body, expected):
    fs = lint_source(_LATCH.format(body=body), "t.py", select=["ATT502"])
    assert [f.line for f in fs] == expected


@pytest.mark.parametrize("target", ["w", "w: torch.Tensor"])
def test_unfused_attention_through_a_plain_or_annotated_assignment(target):
    """ATT601 follows the weights through ``w = softmax(...)`` and ``w: T = softmax(...)`` alike,
    and stays quiet when they escape (returned next to the output)."""
    src = textwrap.dedent(f'''
        import torch


        def attend(q, k, v):
            {target} = torch.softmax(q @ k.transpose(-2, -1) * q.size(-1) ** -0.5, dim=-1)
            return w @ v


        def attend_and_return_weights(q, k, v):
            {target} = torch.softmax(q @ k.transpose(-2, -1) * q.size(-1) ** -0.5, dim=-1)
            return w @ v, w
        ''')
    assert _pairs(lint_source(src, "t.py", select=["ATT601"])) == {(6, "ATT601")}
