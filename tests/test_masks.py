"""Mask algebra (attncheck.lint.analysis.masks): patterns, conventions, dataflow.

The central property: for mask expressions drawn by hypothesis from the constructs the analysis
models (tril/triu with diagonals, ones/zeros/full, arange comparisons with offsets, ~, == 0,
!= 0, .bool(), .float(), 1 - m, transposes, &, |, masked_fill, torch.where), every triangle the
analysis claims to know has exactly that value when torch evaluates the same expression.
"""
from __future__ import annotations

import math

import libcst as cst
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from attncheck.lint.analysis import masks as M
from attncheck.lint.context import FileContext

L = 7


def analysis(src: str) -> M.MaskAnalysis:
    return M.analyze(FileContext(cst.parse_module(src), src, "<t>"))


def pattern_of(expr: str) -> M.MaskVal | None:
    """Analyse ``m = <expr>`` followed by a masked_fill consumer; return the mask value."""
    src = (
        "import torch\n"
        "def f(scores, L):\n"
        f"    m = {expr}\n"
        "    return scores.masked_fill(m, float('-inf')).softmax(-1)\n"
    )
    uses = analysis(src).uses
    assert len(uses) == 1
    return uses[0].mask


def torch_regions(t: torch.Tensor) -> tuple:
    """Region values of a real (L, L) tensor: Z / P / N per triangle, None when mixed."""
    t = t.double()
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    out = []
    for sel in (j < i, j == i, j > i):
        v = t[sel]
        if bool((v == 0).all()):
            out.append("Z")
        elif bool((v > 0).all()):
            out.append("P")
        elif bool((v < 0).all()):
            out.append("N")
        else:
            out.append(None)
    return tuple(out)


# ---------------------------------------------------------------- expression grammar ------
BASES = [
    "torch.ones(L, L)",
    "torch.ones(L, L, dtype=torch.bool)",
    "torch.zeros(L, L)",
    "torch.full((L, L), float('-inf'))",
    "torch.full((L, L), -10000.0)",
]
DIAGS = st.integers(-3, 3)


def _cmp():
    ops = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
    off = st.integers(-2, 2)
    row = st.sampled_from(["torch.arange(L)[:, None]", "torch.arange(L).unsqueeze(-1)",
                           "torch.arange(L).view(-1, 1)"])
    col = st.sampled_from(["torch.arange(L)[None, :]", "torch.arange(L).unsqueeze(0)",
                           "torch.arange(L)"])

    @st.composite
    def build(draw):
        r, c, op, o = draw(row), draw(col), draw(ops), draw(off)
        rr = f"({r} + {o})" if o else r
        return f"({rr} {op} {c})" if draw(st.booleans()) else f"({c} {op} {rr})"
    return build()


def _unary(e: st.SearchStrategy) -> st.SearchStrategy:
    @st.composite
    def build(draw):
        x = draw(e)
        d = draw(DIAGS)
        form = draw(st.sampled_from([
            "torch.tril({x}, diagonal={d})", "torch.triu({x}, {d})", "{x}.tril({d})",
            "{x}.triu({d})", "torch.tril({x})", "{x}.triu()", "(~{x})", "({x} == 0)",
            "({x} != 0)", "{x}.bool()", "{x}.float()", "(1.0 - {x})", "{x}.T",
            "{x}.transpose(-2, -1)", "torch.logical_not({x})", "({x} * -1e4)",
            "{x}[:L, :L]", "{x}.view(1, 1, L, L)[0, 0]", "({x} > 0)", "({x} < 0)",
            "{x}.eq(0)", "{x}.ne(0)", "{x}.gt(0)",
        ]))
        return form.format(x=x, d=d)
    return build()


def _binary(e: st.SearchStrategy) -> st.SearchStrategy:
    @st.composite
    def build(draw):
        a, b = draw(e), draw(e)
        form = draw(st.sampled_from([
            "({a} & {b})", "({a} | {b})", "{a}.masked_fill({b}, float('-inf'))",
            "{a}.masked_fill({b}, 0.0)", "torch.where({a}, 0.0, float('-inf'))",
            "torch.where({a}, float('-inf'), 0.0)", "({a} ^ {b})",
        ]))
        return form.format(a=a, b=b)
    return build()


LEAF = st.one_of(st.sampled_from(BASES), _cmp())
EXPR = st.recursive(LEAF, lambda e: st.one_of(_unary(e), _binary(e)), max_leaves=4)


def _torch_eval(expr: str):
    return eval(expr, {"torch": torch, "L": L, "float": float})


@given(EXPR)
def test_pattern_is_sound_against_torch(expr):
    """Every triangle the analysis claims to know matches torch's evaluation."""
    try:
        with torch.no_grad():
            t = _torch_eval(expr)
    except (RuntimeError, TypeError):
        assume(False)
    assume(isinstance(t, torch.Tensor) and t.shape == (L, L))
    assume(not bool(torch.isnan(t.double()).any()))
    m = pattern_of(expr)
    real = torch_regions(t)
    if m is None or m.pattern is None:
        return
    for claimed, actual in zip(m.pattern, real):
        if claimed is not None:
            assert claimed == actual, (expr, m.pattern, real)


@given(st.sampled_from(["tril", "triu"]), st.integers(-1, 1),
       st.sampled_from(["torch.ones(L, L)", "torch.ones(L, L, dtype=torch.bool)"]))
def test_tril_triu_small_diagonals_are_exact(fn, d, base):
    """tril/triu with diagonal -1, 0, 1 are fully known (no unknown triangle)."""
    expr = f"torch.{fn}({base}, diagonal={d})"
    m = pattern_of(expr)
    assert m is not None and m.pattern == torch_regions(_torch_eval(expr))


@given(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), st.integers(-1, 1), st.booleans())
def test_index_comparisons_are_exact(op, off, swap):
    i, j = "torch.arange(L)[:, None]", "torch.arange(L)[None, :]"
    i = f"({i} + {off})"
    expr = f"({j} {op} {i})" if swap else f"({i} {op} {j})"
    m = pattern_of(expr)
    assert m is not None and m.pattern == torch_regions(_torch_eval(expr))


def _offset_regions(t: torch.Tensor, past: int) -> tuple:
    """:func:`torch_regions` of an (L_q, L_k) mask whose L_q queries are the last of L_k keys:
    query ``i`` sits on key ``i + past``."""
    lq = t.shape[0]
    i = torch.arange(lq)[:, None] + past
    j = torch.arange(t.shape[1])[None, :]
    out = []
    for sel in (j < i, j == i, j > i):
        v = t.double()[sel]
        out.append("Z" if bool((v == 0).all()) else "P" if bool((v > 0).all()) else None)
    return tuple(out)


@given(st.sampled_from(["tril", "triu"]), st.integers(-1, 1), st.integers(0, 3),
       st.sampled_from(["diagonal={d}", "{d}"]),
       st.sampled_from([("off = S - L\n    d = off + {c}", "d"), ("d = S - L + {c}", "d"),
                        ("d = {c} - L + S", "d"), ("d = S - L", "d + {c}"),
                        ("off = {c}\n    d = S - L", "d + off")]))
def test_offset_diagonal_through_locals_matches_torch(fn, c, past, slot, spelling):
    """``torch.tril(torch.ones(L, S), diagonal=d)`` with ``d`` a local holding ``S - L + c``
    (a KV cache of ``S - L`` earlier keys) is the ``diagonal=c`` pattern of the last L queries."""
    setup, arg = spelling
    lq = 5
    body = setup.format(c=c)
    call = f"torch.{fn}(torch.ones(L, S, dtype=torch.bool), {slot.format(d=arg.format(c=c))})"
    src = (
        "import torch\n"
        "def f(scores, L, S):\n"
        f"    {body}\n"
        f"    m = {call}\n"
        "    return scores.masked_fill(m, float('-inf')).softmax(-1)\n"
    )
    uses = analysis(src).uses
    assert len(uses) == 1 and uses[0].mask is not None
    env: dict = {"torch": torch, "L": lq, "S": lq + past}
    exec(body.replace("\n    ", "\n"), env)
    real = _offset_regions(eval(call, env), past)
    assert uses[0].mask.pattern == real, (src, real)


# ---------------------------------------------------------------- conventions -------------
@pytest.mark.parametrize("conv,pattern,expected", [
    ("true_blocked", ("Z", "Z", "P"), (False, False, True)),
    ("true_kept", ("P", "P", "Z"), (False, False, True)),
    ("additive", ("Z", "Z", "N"), (False, False, True)),
    ("additive", ("P", "P", "Z"), (False, False, False)),
    ("true_kept", ("Z", "Z", "P"), (True, True, False)),
    ("true_blocked", (None, "P", "Z"), (None, True, False)),
])
def test_blocked_set(conv, pattern, expected):
    assert M.blocked_set(pattern, conv) == expected


def test_unknown_pattern_has_unknown_blocked_set():
    assert M.blocked_set(None, "true_kept") is None


def _uses(src):
    return analysis(src).uses


def test_sdpa_bool_is_true_kept_and_float_is_additive():
    src = """
import torch
import torch.nn.functional as F
def f(q, k, v, L):
    a = torch.tril(torch.ones(L, L, dtype=torch.bool))
    b = torch.triu(torch.full((L, L), float("-inf")), diagonal=1)
    F.scaled_dot_product_attention(q, k, v, attn_mask=a)
    return F.scaled_dot_product_attention(q, k, v, b)
"""
    u1, u2 = _uses(src)
    assert (u1.consumer, u1.convention, u1.blocked) == ("sdpa", "true_kept", (False, False, True))
    assert (u2.consumer, u2.convention, u2.blocked) == ("sdpa", "additive", (False, False, True))


@pytest.mark.parametrize("given", ["m if is_causal else None", "None if not is_causal else m"])
def test_mask_or_none_conditional_is_the_mask_when_given(given):
    src = f"""
import torch
import torch.nn.functional as F
def f(q, k, v, L, is_causal=False):
    m = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
    F.scaled_dot_product_attention(q, k, v, attn_mask={given})
    a = {given}
    return F.scaled_dot_product_attention(q, k, v, attn_mask=a)
"""
    uses = _uses(src)
    assert [(u.consumer, u.convention, u.blocked) for u in uses] == \
        [("sdpa", "true_kept", (True, True, False))] * 2
    assert [u.node.value for u in uses] == ["m", "a"]


def test_conditional_between_two_masks_joins_them():
    src = """
import torch
import torch.nn.functional as F
def f(q, k, v, L, flag):
    lower = torch.tril(torch.ones(L, L, dtype=torch.bool))
    upper = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
    F.scaled_dot_product_attention(q, k, v, attn_mask=lower if flag else lower.clone())
    return F.scaled_dot_product_attention(q, k, v, attn_mask=lower if flag else upper)
"""
    u1, u2 = _uses(src)
    assert u1.blocked == (False, False, True)
    assert u2.mask is None or u2.mask.pattern in (None, (None, None, None))


def test_register_buffer_slice_and_view_reach_forward():
    src = """
import torch
import torch.nn as nn
class A(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(n, n)).view(1, 1, n, n))
    def forward(self, att, T):
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        return att.softmax(-1)
"""
    (u,) = _uses(src)
    assert u.blocked == (False, False, True)
    assert u.reaches_softmax


def test_gpt2_where_keeps_true_and_mask_value_is_finfo():
    src = """
import torch
class A:
    def __init__(self, n):
        self.register_buffer("bias", torch.tril(torch.ones((n, n), dtype=torch.bool)).view(1, 1, n, n), persistent=False)
    def _attn(self, q, k, v):
        w = torch.matmul(q, k.transpose(-1, -2))
        ql, kl = q.size(-2), k.size(-2)
        causal = self.bias[:, :, kl - ql : kl, :kl]
        mask_value = torch.finfo(w.dtype).min
        mask_value = torch.full([], mask_value, dtype=w.dtype, device=w.device)
        w = torch.where(causal, w.to(w.dtype), mask_value)
        w = torch.nn.functional.softmax(w, dim=-1)
        return torch.matmul(w, v)
"""
    (u,) = _uses(src)
    assert u.consumer == "where" and u.convention == "true_kept"
    assert u.fill.kind == "finfo_min" and u.blocked == (False, False, True)
    assert u.target_tag == "scores"


def test_mha_attribute_and_generate_square_subsequent_mask():
    src = """
import torch
from torch import nn
class D(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 2)
    def forward(self, x):
        m = nn.Transformer.generate_square_subsequent_mask(x.shape[0])
        keep = torch.tril(torch.ones(4, 4, dtype=torch.bool))
        self.mha(x, x, x, attn_mask=m)
        return self.mha(x, x, x, attn_mask=keep)
"""
    u1, u2 = _uses(src)
    assert (u1.consumer, u1.convention, u1.blocked) == ("mha", "additive", (False, False, True))
    assert (u2.convention, u2.blocked) == ("true_blocked", (True, True, False))


def test_branches_join_to_unknown_and_shared_value_survives():
    src = """
import torch
def f(s, L, flag):
    if flag:
        m = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
        n = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
    else:
        m = torch.tril(torch.ones(L, L, dtype=torch.bool))
        n = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
    s = s.masked_fill(m, float("-inf"))
    s = s.masked_fill(n, float("-inf"))
    return s.softmax(-1)
"""
    u1, u2 = _uses(src)
    assert u1.mask.pattern == (None, None, None) or u1.mask.pattern is None
    assert u2.blocked == (False, False, True)


def test_in_place_tril_and_masked_fill_update_the_variable():
    src = """
import torch
def f(s, L):
    m = torch.ones(L, L, dtype=torch.bool)
    m.triu_(1)
    s.masked_fill_(m, float("-inf"))
    return s.softmax(-1)
"""
    (u,) = _uses(src)
    assert u.blocked == (False, False, True) and u.reaches_softmax


def test_helper_return_value_and_call_site_arguments():
    src = """
import torch
def make(L):
    return torch.full((L, L), float("-inf")).triu(1)
def attend(scores, bias):
    return (scores + bias).softmax(-1)
def run(scores):
    return attend(scores, make(5))
"""
    uses = [u for u in _uses(src) if u.function == "attend"]
    assert len(uses) == 1
    assert uses[0].consumer == "additive" and uses[0].blocked == (False, False, True)


@pytest.mark.parametrize("other_first", [False, True])
def test_helper_return_value_is_per_call_site(other_first):
    """A helper's result at a call site comes from that call's arguments only: another call of the
    helper elsewhere in the file (earlier or later, with another mask) neither blurs it to unknown
    nor replaces it.  Here ``attend`` inverts a triu keep-mask: the fill blocks the strict past."""
    helper = "def invert(keep):\n    return ~keep\n"
    attend = ("def attend(scores):\n"
              "    keep = torch.triu(torch.ones(4, 4, dtype=torch.bool))\n"
              "    return scores.masked_fill(invert(keep), float('-inf')).softmax(-1)\n")
    other = ("def other(n):\n"
             "    return invert(torch.tril(torch.ones(n, n, dtype=torch.bool)))\n")
    body = [other, attend] if other_first else [attend, other]
    (u,) = _uses("import torch\n" + helper + "".join(body))
    assert u.function == "attend" and u.consumer == "masked_fill"
    # blocked (filled) exactly below the diagonal: row > col is True, the diagonal and above are kept
    assert u.blocked == (True, False, False)


def test_reaches_softmax_through_locals_but_not_through_layers():
    src = """
import torch
def a(scores, m):
    x = scores.masked_fill(m, 0.0)
    x = x / 2
    return torch.softmax(x, -1)
def b(self_layer, h, m):
    h = h.masked_fill(m, 0.0)
    h = self_layer(h)
    return h.softmax(-1)
"""
    ua, ub = _uses(src)
    assert ua.reaches_softmax is True
    assert ub.reaches_softmax is False


@pytest.mark.parametrize("text,kind,value", [
    ("float('-inf')", "neg_inf", None), ("-float('inf')", "neg_inf", None),
    ("-torch.inf", "neg_inf", None), ("-math.inf", "neg_inf", None),
    ("torch.finfo(s.dtype).min", "finfo_min", None), ("-torch.finfo(s.dtype).max", "finfo_min", None),
    ("-1e9", "literal", -1e9), ("float('-1e9')", "literal", -1e9), ("1e-9", "literal", 1e-9),
    ("torch.tensor(-1e4)", "literal", -1e4), ("float('inf')", "pos_inf", None),
])
def test_fill_classification(text, kind, value):
    src = f"import math, torch\ndef f(s, m):\n    return s.masked_fill(m, {text}).softmax(-1)\n"
    (u,) = _uses(src)
    assert u.fill.kind == kind
    if value is not None:
        assert math.isclose(u.fill.value, value)


@pytest.mark.parametrize("value,blocking,overflow,ineffective", [
    (-1e9, True, True, False), (-1e4, True, False, False), (-100.0, True, False, False),
    (0.0, False, False, True), (1e-9, False, False, True), (-1e-12, False, False, True),
    (-65504.0, True, False, False), (-65505.0, True, True, False),
])
def test_fill_predicates(value, blocking, overflow, ineffective):
    f = M.Fill("literal", value)
    assert (f.blocking, f.overflows_fp16, f.ineffective) == (blocking, overflow, ineffective)


def test_padding_polarity_from_names_and_comparisons():
    src = """
import torch
def f(s, input_ids, valid_mask, key_padding_mask, pad_id):
    s1 = s.masked_fill(valid_mask, float("-inf"))
    s2 = s.masked_fill(~valid_mask, float("-inf"))
    s3 = s.masked_fill(key_padding_mask, float("-inf"))
    s4 = s.masked_fill(input_ids != pad_id, float("-inf"))
    return s1, s2, s3, s4
"""
    pols = [u.mask.polarity for u in _uses(src)]
    assert pols == ["keep", "block", "block", "keep"]


@pytest.mark.parametrize("name", ["attention_mask", "text_attention_mask", "attn_mask", "mask"])
def test_ambiguous_mask_names_have_no_polarity(name):
    """Real code uses these names for keep-masks and for blocked masks alike."""
    src = f"import torch\ndef f(s, {name}):\n    return s.masked_fill({name}, -1e4).softmax(-1)\n"
    (u,) = _uses(src)
    assert u.mask is not None and u.mask.polarity is None


def test_repeat_over_heads_is_recorded():
    src = """
import torch
from torch import nn
def enc(x, key_is_pad, L):
    mha = nn.MultiheadAttention(16, 2)
    per = key_is_pad[:, None, :].expand(-1, L, L)
    mha(x, x, x, attn_mask=per.repeat(mha.num_heads, 1, 1))
    mha(x, x, x, attn_mask=per.repeat_interleave(2, dim=0))
"""
    u1, u2 = _uses(src)
    assert u1.mask.repeated and not u2.mask.repeated


def test_analysis_never_raises_on_odd_code():
    src = """
import torch
def f(*a, **k):
    x = torch.tril(*a)
    y = torch.where(x)
    z = torch.triu(torch.ones(3, 3), diagonal=k["d"])
    w = (z if a else x)[..., ::2]
    q = lambda t: t.masked_fill(t, 1)
    return x.masked_fill(y, z)
class C:
    def __init__(self):
        self.register_buffer(name, torch.tril(torch.ones(2, 2)))
"""
    analysis(src)


_PER_CALL = """
import torch


def apply_mask(scores, blocked, keep):
    if keep:
        return scores.masked_fill(~blocked, float("-inf"))
    return scores.masked_fill(blocked, float("-inf"))


def attend(q, k, v, blocked, keep):
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    scores = apply_mask(scores, blocked, keep)
    return scores.softmax(dim=-1) @ v


def two_calls(q, k, v):
    L = q.size(-2)
    ones = torch.ones(L, L, dtype=torch.bool, device=q.device)
    a = attend(q, k, v, FIRST)
    b = attend(q, k, v, SECOND)
    return a + b
"""


@pytest.mark.parametrize("first, second, expected", [
    # the join of the two masks knows nothing on the diagonal: each call is checked with its own
    ("torch.triu(ones, diagonal=1), False", "torch.triu(ones, diagonal=0), False", {"ATT202"}),
    ("torch.triu(ones, diagonal=1), False", "torch.triu(ones, diagonal=1), False", set()),
    # the flag decides which fill runs at each call: a keep mask at one, a blocked mask at the other
    ("torch.tril(ones), True", "torch.triu(ones, diagonal=1), False", set()),
    ("torch.tril(ones), False", "torch.triu(ones, diagonal=1), False", {"ATT201"}),
    ("torch.tril(ones, diagonal=-1), True", "torch.triu(ones, diagonal=1), False", {"ATT202"}),
])
def test_a_mask_helper_is_checked_at_each_call_with_its_arguments(first, second, expected):
    """A helper that applies the mask it is passed, called from two places with different masks,
    is checked with each call's mask (by value), not with the join of all its call sites; the
    masked scores it returns reach the caller's softmax."""
    from attncheck.lint.engine import lint_source
    src = _PER_CALL.replace("FIRST", first).replace("SECOND", second)
    assert {f.code for f in lint_source(src, "t.py", select=["ATT2"])} == expected


@pytest.mark.parametrize("diagonal, expected", [(1, set()), (0, {"ATT202"})])
def test_xformers_attn_bias_tensor_is_an_additive_mask(diagonal, expected):
    """xformers' ``memory_efficient_attention(q, k, v, attn_bias=t)`` adds the tensor ``t`` to
    the scores (xformers docs), as SDPA does with a float ``attn_mask``."""
    from attncheck.lint.engine import lint_source
    src = f"""
import torch
import xformers.ops as xops


def attend(q, k, v):
    L = q.size(1)
    bias = torch.triu(torch.full((L, L), float("-inf"), dtype=q.dtype), diagonal={diagonal})
    return xops.memory_efficient_attention(q, k, v, attn_bias=bias)
"""
    assert {f.code for f in lint_source(src, "t.py")} == expected


@pytest.mark.parametrize("diagonal, expected", [(1, set()), (0, {"ATT202"})])
def test_a_function_passed_a_mask_is_analysed_whatever_its_names(diagonal, expected):
    """``add_bias(scores, bias)`` holds no mask word and no masking op, but it is passed a causal
    mask: it applies it (here at two calls, the second one with the causal bias)."""
    from attncheck.lint.engine import lint_source
    src = f"""
import math
import torch


def add_bias(scores, bias):
    return scores + bias


def attend(q, k, v):
    L = q.size(-2)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    s = add_bias(s, torch.zeros(L, L, dtype=s.dtype))
    s = add_bias(s, torch.triu(torch.full((L, L), float("-inf"), dtype=s.dtype), diagonal={diagonal}))
    return s.softmax(-1) @ v
"""
    assert {f.code for f in lint_source(src, "t.py")} == expected


def test_full_filled_from_an_attribute_holding_a_literal():
    """``torch.full(shape, self.q)`` with ``self.q = 0.15`` set in ``__init__``: the fill is a
    literal read through an attribute, whose node has no text of its own (it once raised
    TypeError inside the analysis: fairseq's MMPT ``how2processor.py``).  Its dtype is the
    default float, like any fill that is not an integer literal."""
    src = '''
import torch


class Masker:
    def __init__(self):
        self.q = 0.15

    def mask(self, labels, special):
        probability = torch.full(labels.shape, self.q)
        probability.masked_fill_(special, value=0.0)
        return probability
'''
    analysis(src)  # raised TypeError
    from attncheck.lint.engine import lint_source
    assert [f.code for f in lint_source(src, "masker.py", select=("ALL",))] == []
    scores = src.replace("return probability", "return torch.softmax(scores + probability, -1)")
    scores = scores.replace("def mask(self, labels, special)", "def mask(self, labels, special, scores)")
    uses = analysis(scores).uses
    assert [u.mask.dtype for u in uses if u.mask is not None] == ["float"]
