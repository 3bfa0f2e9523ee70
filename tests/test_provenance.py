"""Score provenance (attncheck.lint.analysis.provenance): facts the attention rules stand on."""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attncheck.lint.analysis import provenance as P
from attncheck.lint.context import FileContext


def analyze(src: str) -> P.Provenance:
    src = textwrap.dedent(src)
    module = cst.parse_module(src)
    return P.analyze(FileContext(module, src, "t.py"))


HEADER = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def factors_of(src: str) -> list[list[str]]:
    res = analyze(HEADER + textwrap.dedent(src))
    return [[f.sym.text() for f in ev.factors] for ev in res.scale_events]


@pytest.mark.parametrize("expr", [
    "q @ k.transpose(-2, -1)",
    "torch.matmul(q, k.transpose(-1, -2))",
    "torch.matmul(q, k.transpose(2, 3))",
    "q @ k.mT",
    "torch.bmm(q, k.transpose(1, 2))",
    "torch.baddbmm(b, q, k.transpose(1, 2), beta=0)",
    'torch.einsum("bhid,bhjd->bhij", q, k)',
    'torch.einsum("b h i d, b h j d -> b h i j", q, k)',
])
def test_score_spellings_are_scores(expr):
    res = analyze(HEADER + f"def f(q, k, b):\n    s = {expr}\n    return s.softmax(dim=-1)\n")
    assert len(res.scale_events) == 1
    assert res.softmax_events[0].key_axis == -1


@pytest.mark.parametrize("expr", [
    "torch.einsum(eq, q, k)",            # runtime equation: unknown
    "q @ k",                             # no transpose: not q·kᵀ
    "attn @ v",
    "torch.bmm(q, k)",
])
def test_not_scores(expr):
    res = analyze(HEADER + f"def f(q, k, v, attn, eq):\n    s = {expr}\n    return s.softmax(dim=-1)\n")
    assert res.scale_events == []
    assert res.softmax_events == []


def test_factor_sources_local_init_and_alpha():
    src = """
    class A(nn.Module):
        def __init__(self, dim=64, heads=4):
            super().__init__()
            self.heads, self.head_dim = heads, dim // heads
            self.scale = self.head_dim ** -0.5
            self.qkv = nn.Linear(dim, 3 * dim)

        def forward(self, x):
            B, L, C = x.shape
            q, k, v = self.qkv(x).view(B, L, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
            q = q * self.scale
            s = q @ k.transpose(-2, -1)
            s /= 2.0
            return F.softmax(s, dim=-1) @ v
    """
    (fs,) = factors_of(src)
    assert fs == ["1/√self.head_dim", "0.5"]


@pytest.mark.parametrize("scaling, expected", [
    ("s.div_(math.sqrt(q.shape[-1]))", ["1/√q.shape[-1]"]),
    ("s.mul_(q.shape[-1] ** -0.5)", ["1/√q.shape[-1]"]),
    ("s.mul_(0.5).div_(2.0)", ["0.5", "0.5"]),
    ("s.clamp_(-50.0, 50.0)", []),
])
def test_inplace_method_statement_updates_scores(scaling, expected):
    src = f"""
    def f(q, k, v):
        s = torch.matmul(q, k.transpose(-1, -2))
        {scaling}
        return s.softmax(-1) @ v
    """
    assert factors_of(src) == [expected]


def test_inplace_method_statement_scales_q():
    src = """
    def f(q, k, v):
        q.mul_(q.shape[-1] ** -0.5)
        s = torch.matmul(q, k.transpose(-1, -2))
        return s.softmax(-1) @ v
    """
    assert factors_of(src) == [["1/√q.shape[-1]"]]


def test_baddbmm_alpha_is_a_factor():
    src = """
    def f(q, k, head_dim):
        s = torch.baddbmm(torch.empty(1), q, k.transpose(-1, -2), beta=0, alpha=head_dim ** -0.5)
        return s.softmax(-1)
    """
    assert factors_of(src) == [["1/√head_dim"]]


def test_sdpa_default_scale_and_explicit_one():
    src = """
    def f(q, k, v):
        a = F.scaled_dot_product_attention(q, k, v)
        b = F.scaled_dot_product_attention(q, k, v, scale=1.0)
        return a, b
    """
    res = analyze(HEADER + textwrap.dedent(src))
    kinds = [[f.where for f in ev.factors] for ev in res.scale_events]
    assert kinds == [["sdpa-default"], ["sdpa"]]
    assert res.scale_events[1].factors[0].sym.explicit_one


def test_helper_inlined_with_caller_scale():
    src = """
    def eager(module, query, key, value, scaling, dropout=0.0):
        w = torch.matmul(query, key.transpose(2, 3)) * scaling
        return nn.functional.softmax(w, dim=-1) @ value

    class M(nn.Module):
        def __init__(self, hidden_size=64, num_heads=4):
            super().__init__()
            self.head_dim = hidden_size // num_heads
            self.scaling = self.head_dim ** -0.5

        def forward(self, q, k, v):
            fn = eager
            return fn(self, q, k, v, scaling=self.scaling)
    """
    (fs,) = factors_of(src)
    assert fs == ["1/√self.head_dim"]


def test_default_one_only_when_never_passed():
    never = """
    def attn(q, k, v, sm_scale=1.0):
        return ((q @ k.transpose(-2, -1)) * sm_scale).softmax(-1) @ v

    def caller(q, k, v):
        return attn(q, k, v)
    """
    res = analyze(HEADER + textwrap.dedent(never))
    assert [f.sym.default_one for f in res.scale_events[0].factors] == ["sm_scale"]
    passed = never.replace("attn(q, k, v)\n", "attn(q, k, v, sm_scale=1.0)\n")
    res = analyze(HEADER + textwrap.dedent(passed))
    (f,) = res.scale_events[0].factors
    assert f.sym.explicit_one and not f.sym.default_one


def test_softmax_module_on_self_and_rank():
    src = """
    class A(nn.Module):
        def __init__(self):
            super().__init__()
            self.softmax = nn.Softmax(dim=0)

        def forward(self, q, c):
            B, L, D = q.shape
            s = torch.bmm(q, c.transpose(1, 2)).view(B * L, -1)
            return self.softmax(s)
    """
    (ev,) = analyze(HEADER + textwrap.dedent(src)).softmax_events
    assert (ev.dim, ev.rank, ev.key_axis, ev.implicit) == (0, 2, -1, False)


def test_head_layout_events():
    src = """
    class A(nn.Module):
        def __init__(self, dim=16, heads=4):
            super().__init__()
            self.h, self.d = heads, dim // heads
            self.W = nn.Linear(dim, dim)

        def forward(self, x):
            B, T, C = x.shape
            good = self.W(x).view(B, T, self.h, self.d).transpose(1, 2)
            bad = self.W(x).view(B, self.h, T, self.d)
            merged_ok = good.transpose(1, 2).reshape(B, T, C)
            merged_bad = good.reshape(B, T, C)
            return bad, merged_ok, merged_bad
    """
    evs = analyze(HEADER + textwrap.dedent(src)).view_events
    assert sorted((ev.code, ev.out_axes) for ev in evs) == [
        ("ATT401", (("B",), ("H",), ("L",), ("d",))),
        ("ATT402", (("B",), ("L",), ("H", "d"))),
    ]


@pytest.mark.parametrize("name,role", [
    ("head_dim", "d"), ("self.d_k", "d"), ("config.hidden_size", "E"), ("n_embd", "E"), ("C", "E"),
    ("self.num_heads", "H"), ("bsz", "B"), ("q_len", "L"), ("T", "L"), ("temperature", "?"),
])
def test_role_by_name(name, role):
    assert P.role_by_name(name) == role


def test_parse_einsum():
    assert P.parse_einsum("bhid,bhjd->bhij") == (["bhid", "bhjd"], "bhij")
    ins, out = P.parse_einsum("b h i d, b h j d -> b h i j")
    assert ins == ["bhid", "bhjd"] and out == "bhij"
    assert P.parse_einsum("bhij") is None


dims = st.sampled_from([P.Dim("head_dim", "d", 64.0), P.Dim("d_model", "E", 512.0), P.Dim("heads", "H", 8.0)])
exps = st.sampled_from([-1.0, -0.5, 0.5, 1.0, 2.0])


@given(dims, exps, exps)
def test_sym_power_laws(d, a, b):
    s = P.Sym.dim(d)
    assert s.pow(a).pow(b) == s.pow(a * b)
    assert s.pow(a).mul(s.pow(b)) == (s.pow(a + b) if a + b != 0 else P.Sym())
    v = s.pow(a).value()
    assert v == pytest.approx(d.value ** a)


@given(st.lists(st.sampled_from(["B", "H", "L"]), min_size=1, max_size=3, unique=True))
def test_sym_atoms_of_products(roles):
    s = P.Sym()
    for r in roles:
        s = s.mul(P.Sym.dim(P.Dim(r.lower() + "_", r)))
    assert s.atoms() == tuple(roles)
    # dividing the last factor back out leaves the others
    last = P.Sym.dim(P.Dim(roles[-1].lower() + "_", roles[-1]))
    assert s.mul(last.inv()).atoms() == tuple(roles[:-1])


def test_weights_meeting_v_mark_the_scale_event():
    src = """
    def kernel(q, k, v):
        a = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
        b = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
        return F.dropout(a, 0.1, training=False) @ v, b
    """
    evs = analyze(HEADER + textwrap.dedent(src)).scale_events
    assert [ev.to_v for ev in evs] == [True, False]
    assert [(ev.q.origin, ev.q.pname, ev.k.pname) for ev in evs] == [("param", "q", "k")] * 2


@pytest.mark.parametrize("heads,width_expr", [
    ("nn_", "dim // nn_"), ("groups_x", "dim / groups_x"), ("hh", None),
])
def test_head_count_by_structure(heads, width_expr):
    """``width // X`` or ``view(B, L, X, -1)`` of a projection makes X the head count, whatever its
    name: the split is a layout fact (a misplaced split fires) and the quotient is a head dim."""
    init = f"self.hd = {width_expr}" if width_expr else "self.hd = 8"
    last = "self.hd" if width_expr else "-1"
    src = f"""
    class A(nn.Module):
        def __init__(self, dim=32, {heads}=4):
            super().__init__()
            self.{heads} = {heads}
            {init}
            self.W = nn.Linear(dim, dim)

        def forward(self, x):
            B, T, C = x.shape
            good = self.W(x).view(B, T, self.{heads}, {last}).transpose(1, 2)
            return good.reshape(B, T, C)
    """
    res = analyze(HEADER + textwrap.dedent(src))
    assert [(ev.code, ev.out_axes[-1]) for ev in res.view_events] == [("ATT402", ("H", "d"))]
    # a structural fact holds inside the analysis of its class only: a rule asking afterwards (or
    # the next file) gets the role by name
    assert P.role_by_name(heads) == "?"


def test_split_survives_only_the_key_transpose():
    """A (B, L, H, d) split is cleared by transpose(1, 2) / permute, kept through the key's last-two
    swap (also transpose(2, 3) on a tensor of unknown rank), and reported where it meets q·kᵀ."""
    src = """
    def f(module, query, key, value):
        return torch.matmul(torch.softmax(torch.matmul(query, key.transpose({kt})), -1), value)

    class A(nn.Module):
        def __init__(self, dim=32, num_heads=4):
            super().__init__()
            self.head_dim = dim // num_heads
            self.k_proj = nn.Linear(dim, dim)
            self.q_proj = nn.Linear(dim, dim)

        def forward(self, x):
            shape = (*x.shape[:-1], -1, self.head_dim)
            q = self.q_proj(x).view(shape).transpose(1, 2)
            k = self.k_proj(x).view(shape){k_tail}
            return f(self, q * self.head_dim ** -0.5, k, q)
    """
    for kt in ("2, 3", "-1, -2"):
        for k_tail, fires in ((".transpose(1, 2)", False), ("", True), (".permute(0, 2, 1, 3)", False)):
            evs = analyze(HEADER + textwrap.dedent(src.format(kt=kt, k_tail=k_tail))).view_events
            assert [(ev.code, ev.reason) for ev in evs] == ([("ATT401", "scores")] if fires else []), (kt, k_tail)


@pytest.mark.parametrize("setter_first", [True, False])
def test_a_method_sees_init_attributes_not_other_methods(setter_first):
    """Each method is analysed from the attributes ``__init__`` sets: ``self.scale = 1.0`` in a
    setter is unknown to ``forward`` whichever comes first in the class (it used to leak into
    every method defined after it, which then reported unscaled scores, ATT101).  The same
    assignment in ``__init__`` does reach ``forward``."""
    from attncheck.lint.engine import lint_source

    setter = "    def set_temperature(self, t):\n        self.scale = 1.0\n"
    forward = ("    def forward(self, x):\n"
               "        q, k = self.q(x), self.k(x)\n"
               "        return ((q @ k.transpose(-2, -1)) * self.scale).softmax(-1)\n")
    init = ("    def __init__(self, dim):\n"
            "        super().__init__()\n"
            "        self.q = nn.Linear(dim, dim)\n"
            "        self.k = nn.Linear(dim, dim)\n{}")
    for in_init, expect in (("", []), ("        self.scale = 1.0\n", ["ATT101"])):
        body = [init.format(in_init)] + ([setter, forward] if setter_first else [forward, setter])
        src = HEADER + "class A(nn.Module):\n" + "".join(body)
        assert [f.code for f in lint_source(src, select=["ATT101"])] == expect, in_init


@pytest.mark.parametrize("width", ["C", "D", "d", "E", "hd", "n", "T", "dim", "width"])
@pytest.mark.parametrize("merge, expect", [
    ("y.reshape(B, L, {w})", ["ATT402"]),
    ("y.transpose(1, 2).reshape(B, L, {w})", []),
])
def test_width_unpacked_from_a_projected_input_is_the_width_whatever_its_name(width, merge, expect):
    """``B, L, D = x.shape`` of the input a projection reads: the last axis is the model width
    (heads · head_dim), whether the local is named ``C``, ``D`` or ``hd``; a merge of
    ``(B, H, L, d)`` viewed as ``(B, L, D)`` without moving the heads back is ATT402."""
    from attncheck.lint.engine import lint_source
    w = width
    src = HEADER + textwrap.dedent(f"""
        class Attention(nn.Module):
            def __init__(self, d_model, n_heads):
                super().__init__()
                self.n_heads = n_heads
                self.qkv = nn.Linear(d_model, 3 * d_model)
                self.proj = nn.Linear(d_model, d_model)

            def forward(self, x):
                B, L, {w} = x.shape
                q, k, v = self.qkv(x).split({w}, dim=2)
                q = q.view(B, L, self.n_heads, {w} // self.n_heads).transpose(1, 2)
                k = k.view(B, L, self.n_heads, {w} // self.n_heads).transpose(1, 2)
                v = v.view(B, L, self.n_heads, {w} // self.n_heads).transpose(1, 2)
                y = F.scaled_dot_product_attention(q, k, v)
                y = {merge.format(w=w)}
                return self.proj(y)
        """)
    assert [f.code for f in lint_source(src, "t.py", select=["ATT4"])] == expect


@pytest.mark.parametrize("kernel, scale, expect", [
    ("flash_attn_func(q, k, v, softmax_scale={s})", "self.head_dim ** -0.5", []),
    ("flash_attn_func(q, k, v, softmax_scale={s})", "C ** -0.5", ["ATT102"]),
    ("flash_attn_func(q, k, v)", "", []),
    ("xops.memory_efficient_attention(q, k, v, scale={s})", "C ** -0.5", ["ATT102"]),
    ("xops.memory_efficient_attention(q, k, v, scale={s})", "1.0 / self.head_dim", ["ATT103"]),
])
@pytest.mark.parametrize("linear", ["nn.Linear(d_model, 3 * d_model)",
                                    "nn.Linear(d_model, 3 * d_model).to(torch.float64)"])
def test_fused_kernel_scale_arguments_are_scale_factors(kernel, scale, expect, linear):
    """flash-attn's ``softmax_scale`` and xformers' ``scale`` (both ``1/√d`` by default) are the
    scale of q·kᵀ, as SDPA's ``scale=``: a width-based one is ATT102, ``1/d`` ATT103.  A module
    cast or moved where it is built (``.to(dtype)``) is the same projection."""
    from attncheck.lint.engine import lint_source
    src = HEADER + "import xformers.ops as xops\nfrom flash_attn import flash_attn_func\n" + textwrap.dedent(f"""
        class Attention(nn.Module):
            def __init__(self, d_model, n_heads):
                super().__init__()
                self.n_heads = n_heads
                self.head_dim = d_model // n_heads
                self.qkv = {linear}

            def forward(self, x):
                B, L, C = x.shape
                q, k, v = self.qkv(x).split(C, dim=2)
                q, k, v = (t.view(B, L, self.n_heads, self.head_dim) for t in (q, k, v))
                y = {kernel.format(s=scale)}
                return y.reshape(B, L, C)
        """)
    assert [f.code for f in lint_source(src, "t.py", select=["ATT1", "ATT4"])] == expect
