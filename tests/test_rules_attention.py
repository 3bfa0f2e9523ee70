"""ATT101–105 (scale), ATT301 (softmax axis), ATT401/402 (head layout), ATT501 (dropout in eval).

Properties: a generated attention layer with a scale of a given exponent / dimension / spelling /
position raises exactly the code an independent oracle predicts; softmax over every axis of 3-D
and 4-D scores fires iff the axis is not the key axis; head splits fire iff L and H swap.
"""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attncheck.lint.analysis import provenance
from attncheck.lint.context import FileContext
from attncheck.lint.engine import lint_source

MINE = ("ATT101", "ATT102", "ATT103", "ATT104", "ATT105", "ATT301", "ATT401", "ATT402", "ATT501")


def codes(src: str) -> list[tuple[int, str]]:
    return sorted((f.line, f.code) for f in lint_source(textwrap.dedent(src), "t.py", select=MINE))


def only_codes(src: str) -> set[str]:
    return {c for _, c in codes(src)}


LAYER = '''
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, embed_dim=64, num_heads=4):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        {q_line}
        scores = q @ k.transpose(-2, -1){s_suffix}
        return F.softmax(scores, dim=-1) @ v
'''

SPELLINGS = {
    -0.5: ["* {d} ** -0.5", "/ math.sqrt({d})", "* (1.0 / math.sqrt({d}))", "/ {d} ** 0.5"],
    -1.0: ["/ {d}", "* (1.0 / {d})", "* {d} ** -1"],
    0.5: ["* math.sqrt({d})", "/ {d} ** -0.5", "* {d} ** 0.5"],
}
DIMS = {"self.head_dim": "d", "C": "E", "self.embed_dim": "E", "self.num_heads": "H"}


def oracle(exp: float, role: str) -> set[str]:
    """Expected codes for per-head q/k scaled once by dim**exp (Vaswani et al. 2017: head_dim**-0.5)."""
    if exp > 0:
        return {"ATT105"}
    if role in ("E", "H"):
        return {"ATT102"}
    return set() if exp == -0.5 else {"ATT103"}


@given(st.sampled_from(sorted(SPELLINGS)), st.sampled_from(sorted(DIMS)), st.data(), st.booleans())
def test_scale_oracle(exp, dim, data, on_q):
    spelling = data.draw(st.sampled_from(SPELLINGS[exp])).format(d=dim)
    if on_q:
        src = LAYER.format(q_line=f"q = q {spelling}", s_suffix="")
    else:
        src = LAYER.format(q_line="pass", s_suffix=f" {spelling}")
    assert only_codes(src) == oracle(exp, DIMS[dim])


def test_unscaled_and_double_scaled():
    assert only_codes(LAYER.format(q_line="pass", s_suffix="")) == {"ATT101"}
    twice = LAYER.format(q_line="q = q * self.head_dim ** -0.5", s_suffix=" / math.sqrt(self.head_dim)")
    assert only_codes(twice) == {"ATT104"}


@pytest.mark.parametrize("tail,expected", [
    ("F.scaled_dot_product_attention(q, k, v)", set()),
    ("F.scaled_dot_product_attention(q * self.head_dim ** -0.5, k, v)", {"ATT104"}),
    ("F.scaled_dot_product_attention(q * self.head_dim ** -0.5, k, v, scale=1.0)", set()),
    ("F.scaled_dot_product_attention(q, k, v, scale=1.0)", set()),          # T5-style: explicit
    ("F.scaled_dot_product_attention(q, k, v, scale=self.embed_dim ** -0.5)", {"ATT102"}),
    ("F.scaled_dot_product_attention(q, k, v, scale=1 / self.head_dim)", {"ATT103"}),
    ("F.scaled_dot_product_attention(q, k, v, scale=math.sqrt(self.head_dim))", {"ATT105"}),
])
def test_sdpa_scale(tail, expected):
    src = LAYER.replace("scores = q @ k.transpose(-2, -1){s_suffix}\n        return F.softmax(scores, dim=-1) @ v",
                        "return " + tail).format(q_line="pass")
    assert only_codes(src) == expected


@pytest.mark.parametrize("fallback, expected", [
    ("if scale is None:\n            scale = self.head_dim ** -0.5", set()),
    ("if scale is None:\n            scale = torch.rsqrt(torch.tensor(self.embed_dim))", {"ATT102"}),
    ("if scale is None:\n            scale = 1 / math.sqrt(C)", {"ATT102"}),
    ("scale = scale or C ** -0.5", {"ATT102"}),
    ("if scale is None:\n            scale = math.sqrt(self.head_dim)", {"ATT105"}),
])
def test_scale_parameter_falls_back_to_its_default(fallback, expected):
    """``forward(x, scale=None)`` with ``if scale is None: scale = ...``: the scale used when no
    caller passes one is the fallback, checked like a scale written directly."""
    src = LAYER.replace("def forward(self, x):", "def forward(self, x, scale=None):").format(
        q_line=fallback, s_suffix=" * scale")
    assert only_codes(src) == expected


@pytest.mark.parametrize("norm, expected", [
    ("q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)", set()),
    ("pass", {"ATT104"}),
])
def test_learned_scales_on_normalised_q_and_k_are_temperatures(norm, expected):
    """nViT / nGPT: q and k are l2-normalised, then each multiplied by a learned ``s_qk``
    (initialised to head_dim ** 0.25) and SDPA runs with scale=1: a learned temperature, not two
    1/√d scales.  The same two scale factors on raw q and k are reported."""
    body = (f"{norm}\n        q = q * self.q_scale\n        k = k * self.k_scale\n"
            "        return F.scaled_dot_product_attention(q, k, v, scale=1.0)")
    src = LAYER.replace("{q_line}\n        scores = q @ k.transpose(-2, -1){s_suffix}\n"
                        "        return F.softmax(scores, dim=-1) @ v", body)
    assert only_codes(src) == expected


ACCEPTED = {
    "learned temperature": "scores = (q @ k.transpose(-2, -1)) * self.logit_scale.exp()",
    "cosine": "scores = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)",
    "finfo is not a scale": "scores = (q @ k.transpose(-2, -1) * self.head_dim ** -0.5).masked_fill("
                            "x[..., :1] > 0, torch.finfo(x.dtype).min)",
    "unknown attr": "scores = q @ k.transpose(-2, -1) * self.softmax_scale",
    "branch": "scores = q @ k.transpose(-2, -1)\n        if self.scale_attn:\n"
              "            scores = scores / math.sqrt(self.head_dim)",
}


@pytest.mark.parametrize("body", ACCEPTED.values(), ids=list(ACCEPTED))
def test_accepted_patterns(body):
    src = LAYER.replace("scores = q @ k.transpose(-2, -1){s_suffix}", body).format(q_line="pass")
    assert codes(src) == []


def test_single_head_3d_channel_scale_is_fine_but_projected_head_is_not():
    conv = '''
    import math
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, in_channels=16, head_size=4):
            super().__init__()
            self.q = nn.Conv2d(in_channels, in_channels, 1)
            self.k = nn.Conv2d(in_channels, in_channels, 1)
            self.key = nn.Linear(in_channels, head_size)
            self.query = nn.Linear(in_channels, head_size)

        def forward(self, x, t):
            B, C, H, W = x.shape
            q = self.q(x).reshape(B, C, H * W).permute(0, 2, 1)
            k = self.k(x).reshape(B, C, H * W)
            w = torch.bmm(q, k) / math.sqrt(C)
            w = torch.bmm(q, k.permute(0, 2, 1).transpose(1, 2)) * int(C) ** -0.5
            return torch.softmax(w, dim=2)

        def head(self, t):
            B, T, C = t.shape
            s = self.query(t) @ self.key(t).transpose(-2, -1) * C ** -0.5
            return s.softmax(-1)
    '''
    assert codes(conv) == [(24, "ATT102")]


SOFTMAX = '''
import torch
import torch.nn.functional as F


def attend(q, k, v):
    s = {scores} * q.shape[-1] ** -0.5
    return {softmax} @ v
'''


@given(st.sampled_from([3, 4]), st.data(), st.sampled_from(["F.softmax(s, dim={d})", "s.softmax({d})",
                                                              "torch.softmax(s, {d})"]))
def test_softmax_axis_property(rank, data, call):
    d = data.draw(st.integers(-rank, rank - 1))
    scores = "torch.bmm(q, k.transpose(1, 2))" if rank == 3 else \
        "torch.matmul(q.view(2, 3, 4, 5), k.view(2, 3, 4, 5).transpose(-2, -1))"
    src = SOFTMAX.format(scores=scores, softmax=call.format(d=d))
    wrong = d % rank != rank - 1
    assert only_codes(src) == ({"ATT301"} if wrong else set())


KEYS_FIRST = '''
import torch
import torch.nn.functional as F


def attend(q, k, v):
    s = {scores} * q.shape[-1] ** -0.5
    p = F.dropout(s.softmax(dim={d}), p=0.1, training=False)
    return {weights} @ v
'''


@pytest.mark.parametrize("scores", ["k @ q.transpose(-2, -1)", "q @ k.transpose(-2, -1)",
                                    "torch.matmul(k.view(2, 3, 4, 5), q.view(2, 3, 4, 5).transpose(2, 3))"])
@pytest.mark.parametrize("weights", ["p", "p.transpose(-2, -1)", "torch.transpose(p, -1, -2)", "p.mT"])
@pytest.mark.parametrize("d", [-1, -2])
def test_softmax_axis_is_the_axis_the_values_are_summed_over(scores, weights, d):
    """Whichever operand comes first, the key axis of the weights is the one ``@ v`` sums over:
    the last axis of ``p``, the second-to-last of ``p`` when ``p`` is transposed first."""
    summed = -1 if weights == "p" else -2
    src = KEYS_FIRST.format(scores=scores, d=d, weights=weights)
    found = lint_source(src, "t.py", select=("ATT301",))
    assert [f.code for f in found] == ([] if d == summed else ["ATT301"])
    if found and summed == -2:
        rank4 = "view" in scores
        assert f"key axis is dim {2 if rank4 else -2}:" in found[0].message
        assert found[0].fix is None  # the dim=-1 rewrite is for scores whose key axis is last


@pytest.mark.parametrize("rank,expected", [(3, {"ATT301"}), (4, {"ATT301"})])
def test_implicit_softmax_dim(rank, expected):
    scores = "torch.bmm(q, k.transpose(1, 2))" if rank == 3 else \
        "torch.matmul(q.view(2, 3, 4, 5), k.view(2, 3, 4, 5).transpose(-2, -1))"
    assert only_codes(SOFTMAX.format(scores=scores, softmax="F.softmax(s)")) == expected


def test_non_attention_softmax_does_not_fire():
    src = '''
    import torch
    import torch.nn.functional as F

    def clip(image_embeds, text_embeds, logit_scale, router, x):
        logits = logit_scale.exp() * text_embeds @ image_embeds.t()
        p = logits.softmax(dim=0)
        gates = F.softmax(router(x), dim=1)
        return p, gates
    '''
    assert codes(src) == []


HEADS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class A(nn.Module):
    def __init__(self, dim=32, num_heads=4):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        y = self.proj(x){op}
        return {ret}

    def attend(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)
'''
H_OPS = {
    ".view(B, T, self.num_heads, self.head_dim).transpose(1, 2)": set(),
    ".view(B, -1, self.num_heads, self.head_dim).permute(0, 2, 1, 3)": set(),
    ".view(B, self.num_heads, T, self.head_dim)": {"ATT401"},
    ".reshape(B, self.num_heads, -1, self.head_dim)": {"ATT401"},
    ".view(B * self.num_heads, T, self.head_dim)": {"ATT401"},
    ".view(B * self.num_heads, -1, self.head_dim)": {"ATT401"},
    ".view(B, T, self.num_heads, self.head_dim).transpose(1, 2).reshape(B * self.num_heads, T, self.head_dim)": set(),
    ".view(B, T, self.num_heads, self.head_dim).transpose(1, 2).transpose(1, 2).reshape(B, T, C)": set(),
    ".view(B, T, self.num_heads, self.head_dim).transpose(1, 2).reshape(B, T, C)": {"ATT402"},
    ".view(B, T, self.num_heads, self.head_dim).transpose(1, 2).contiguous().view(B, T, -1)": {"ATT402"},
    ".view(B, T, self.num_heads, self.head_dim).transpose(1, 2).reshape(B * self.num_heads, T, -1).view(B, T, C)":
        {"ATT402"},
}


@pytest.mark.parametrize("op,expected", H_OPS.items(), ids=range(len(H_OPS)))
def test_head_layouts(op, expected):
    """In a method that forms attention through a helper it calls (any of its tensors; here SDPA
    over the projection's input), a view that moves the heads across the tokens is reported."""
    src = HEADS.format(op=op, ret="y, self.attend(x, x, x)")
    assert only_codes(src) == expected


@pytest.mark.parametrize("op", [op for op, expected in H_OPS.items() if expected])
def test_head_layouts_outside_attention_are_not_reported(op):
    """The same views in a method whose run forms no attention (no q·kᵀ, weights·v, softmax
    over scores or fused kernel in it or the helpers it calls): the tensor is not known to be
    attention's, so there is no finding — the provenance analysis still sees the view."""
    src = HEADS.format(op=op, ret="y")
    assert only_codes(src) == set()
    events = provenance.analyze(FileContext(cst.parse_module(src), src, "heads.py")).view_events
    assert events and not any(ev.in_attention for ev in events)


DROP = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class A(nn.Module):
    def __init__(self, p=0.1):
        super().__init__()
        self.p = p
        self.drop = nn.Dropout(p)

    def forward(self, q, k, v, dropout_p=0.1):
        w = torch.softmax(q @ k.transpose(-2, -1) * q.size(-1) ** -0.5, dim=-1)
        {pre}
        return {call}
'''
D_CASES = [
    ("pass", "F.dropout(w, self.p)", {"ATT501"}),
    ("pass", "F.dropout(w, p=self.p, training=True)", {"ATT501"}),
    ("pass", "F.dropout(w, p=self.p, training=self.training)", set()),
    ("pass", "F.dropout(w, self.p, self.training)", set()),
    ("pass", "self.drop(w)", set()),
    ("pass", "F.scaled_dot_product_attention(q, k, v, dropout_p=self.p)", {"ATT501"}),
    ("pass", "F.scaled_dot_product_attention(q, k, v, None, self.p)", {"ATT501"}),
    ("pass", "F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0)", set()),
    ("pass", "F.scaled_dot_product_attention(q, k, v, dropout_p=0.0 if not self.training else self.p)", set()),
    ("pass", "F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)", set()),   # caller's business
    ("pass", "F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)", set()),
    ("p = self.p if self.training else 0.0", "F.scaled_dot_product_attention(q, k, v, dropout_p=p)", set()),
    ("p = self.drop.p", "F.scaled_dot_product_attention(q, k, v, dropout_p=p)", {"ATT501"}),
]


@pytest.mark.parametrize("pre,call,expected", D_CASES, ids=range(len(D_CASES)))
def test_dropout_gating(pre, call, expected):
    assert only_codes(DROP.format(pre=pre, call=call)) == expected


NOT_ATTENTION_DROPOUT = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Prenet(nn.Module):
    """Always-on dropout on activations (a speech decoder prenet): a design choice."""

    def __init__(self, d=8, p=0.5):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(2)])
        self.p = p

    def forward(self, x, q, k):
        for layer in self.layers:
            x = F.dropout(F.relu(layer(x)), p=self.p{train})
        feats = F.dropout(x, p=self.p)
        {attn}
        return feats
'''


@pytest.mark.parametrize("train", [", training=True", ""])
def test_dropout_of_tensors_that_are_not_attention_weights_is_not_flagged(train):
    """Dropout on activations or features (prenet, Monte-Carlo dropout) is not attention dropout,
    with training=True written out or left to its default; the same call on softmax(q·kᵀ) is."""
    assert only_codes(NOT_ATTENTION_DROPOUT.format(train=train, attn="")) == set()
    buggy = NOT_ATTENTION_DROPOUT.format(
        train=train, attn="a = F.dropout(torch.softmax(q @ k.transpose(-2, -1) * q.size(-1) ** -0.5, dim=-1), "
                          "p=self.p" + train + ")")
    assert [c for _, c in codes(buggy)] == ["ATT501"]


def test_dropout_outside_module_is_not_flagged():
    src = "import torch.nn.functional as F\n\ndef f(w, p):\n    return F.dropout(w, p)\n"
    assert codes(src) == []


def test_dropout_under_training_guard():
    src = DROP.format(pre="if not self.training:\n            dropout_p = 0.0",
                      call="F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)")
    assert codes(src) == []
    src = DROP.format(pre="if self.training:\n            w = F.dropout(w, self.p)", call="w")
    assert codes(src) == []


# ---------------------------------------------------------------- mutation-testing regressions

BARE = '''
import torch
import torch.nn.functional as F


def kernel({qn}, {kn}, {vn}, mask=None):
    {body}
'''
BARE_CASES = [
    # (q name, k name, body, fires): softmax(q @ kᵀ) @ v on parameters named like q and k
    ("q", "k", "return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v", True),
    ("q", "k", "s = torch.matmul(q, k.transpose(-2, -1))\n    p = s.softmax(-1)\n    return p @ v", True),
    ("query", "key", "w = F.softmax(torch.matmul(query, key.transpose(2, 3)), dim=-1)\n"
                     "    w = F.dropout(w, 0.1, training=False)\n    return torch.matmul(w, value)", True),
    ("query_states", "key_states",
     "s = query_states @ key_states.mT\n    s = s.masked_fill(mask, float('-inf'))\n"
     "    return s.softmax(dim=-1) @ value_states", True),
    # scaled: clean
    ("q", "k", "return torch.softmax(q @ k.transpose(-2, -1) * q.size(-1) ** -0.5, dim=-1) @ v", False),
    # not multiplied with values: a similarity/matching softmax, not the kernel
    ("q", "k", "return torch.softmax(q @ k.transpose(-2, -1), dim=-1)", False),
    # parameters not named like q/k: unknown role
    ("a", "b", "return torch.softmax(a @ b.transpose(-2, -1), dim=-1) @ c", False),
    # T5: learned relative position bias added, 1/sqrt(d_kv) folded into the q init
    ("query", "key", "s = torch.matmul(query, key.transpose(3, 2))\n    s += mask.position_bias\n"
                     "    return torch.matmul(F.softmax(s.float(), dim=-1).type_as(s), value)", False),
]


@pytest.mark.parametrize("qn,kn,body,fires", BARE_CASES, ids=range(len(BARE_CASES)))
def test_bare_kernel_missing_scale(qn, kn, body, fires):
    vn = {"q": "v", "query": "value", "query_states": "value_states"}.get(qn, "c")
    src = BARE.format(qn=qn, kn=kn, vn=vn, body=body)
    assert (only_codes(src) == {"ATT101"}) is fires, codes(src)


def test_t5_position_bias_name_exempts_only_that_bias():
    body = ("s = torch.matmul(q, k.transpose(-2, -1))\n    s = s + {b}\n"
            "    return torch.softmax(s, dim=-1) @ v")
    assert only_codes(BARE.format(qn="q", kn="k", vn="v", body=body.format(b="mask"))) == {"ATT101"}
    assert only_codes(BARE.format(qn="q", kn="k", vn="v", body=body.format(b="position_bias_masked"))) == set()
    # Swin's relative_position_bias comes with a real scale: not an exemption
    src = "import torch\n\ndef f(q, k, v, relative_position_bias):\n" \
          "    s = q @ k.transpose(-2, -1) + relative_position_bias\n    return s.softmax(-1) @ v\n"
    assert only_codes(src) == {"ATT101"}


_plain_names = st.from_regex(r"[a-z]{3,7}_x", fullmatch=True)


@given(_plain_names, st.booleans(), st.sampled_from(["1.0", "1", "0.5", "None"]))
def test_explicit_unit_scale_is_name_independent(name, keyword, value):
    """A literal 1.0 passed for the parameter that multiplies the scores is an explicit unit scale
    (T5) whatever the parameter is called; passing nothing real keeps ATT101 silent only then."""
    arg = f"{name}={value}" if keyword else value
    src = textwrap.dedent(f'''
        import torch
        import torch.nn as nn


        def biased(query, key, value, {name}):
            scores = torch.matmul(query, key.transpose(3, 2)) * {name}
            return torch.matmul(torch.softmax(scores, dim=-1), value)


        class T5Like(nn.Module):
            def __init__(self, d=32, h=4):
                super().__init__()
                self.n_heads, self.d_kv = h, d // h
                self.q = nn.Linear(d, d)
                self.k = nn.Linear(d, d)
                self.v = nn.Linear(d, d)

            def forward(self, x):
                B, L, _ = x.shape
                q = self.q(x).view(B, L, self.n_heads, self.d_kv).transpose(1, 2)
                k = self.k(x).view(B, L, self.n_heads, self.d_kv).transpose(1, 2)
                v = self.v(x).view(B, L, self.n_heads, self.d_kv).transpose(1, 2)
                return biased(q, k, v, {arg})
    ''')
    found = only_codes(src)
    if value in ("1.0", "1"):
        assert found == set()
    elif value == "None":
        assert "ATT101" not in found  # unknown (None * scores would raise): no claim
    else:
        assert "ATT101" not in found


SPLIT = '''
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


def eager(module, query, key, value, scaling):
    w = torch.matmul(query, key.transpose({kt})) * scaling
    w = F.softmax(w, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(w, value).transpose(1, 2).contiguous()


class Attn(nn.Module):
    def __init__(self, hidden_size=32, {hname}=4):
        super().__init__()
        self.{hname} = {hname}
        self.{dname} = hidden_size // {hname}
        self.q_proj = nn.Linear(hidden_size, hidden_size)
        self.k_proj = nn.Linear(hidden_size, hidden_size)
        self.v_proj = nn.Linear(hidden_size, hidden_size)

    def forward(self, x):
        B, T, C = x.shape
        {split_q}
        {split_k}
        {split_v}
        {attend}
'''


def _split_src(missing: set, style: str, kt: str, hname: str, dname: str) -> tuple[str, set]:
    lines = {}
    for i, n in enumerate("qkv"):
        if style == "nanogpt":
            base = f"{n} = self.{n}_proj(x).view(B, T, self.{hname}, C // self.{hname})"
        elif style == "hf":
            base = f"{n} = self.{n}_proj(x).view(*x.shape[:-1], -1, self.{dname})"
        else:
            base = f"{n} = self.{n}_proj(x).view(B, -1, self.{hname}, self.{dname})"
        lines[f"split_{n}"] = base + ("" if n in missing else ".transpose(1, 2)")
    attend = (f"return eager(self, q, k, v, self.{dname} ** -0.5)" if style == "hf" else
              f"w = (q @ k.transpose(-2, -1)) / math.sqrt(self.{dname})\n"
              "        return (w.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, C)")
    src = SPLIT.format(kt=kt, hname=hname, dname=dname, attend=attend, **lines)
    first = next(i for i, line in enumerate(src.splitlines(), 1) if line.strip().startswith("q = self.q_proj"))
    return src, {first + "qkv".index(n) for n in missing}


_ident = st.from_regex(r"[a-z]{2,6}_[a-z]{1,3}", fullmatch=True).filter(lambda s: s not in ("d_k", "d_v"))


@given(st.sets(st.sampled_from("qkv")), st.sampled_from(["nanogpt", "hf", "textbook"]),
       st.sampled_from(["2, 3", "-1, -2", "-2, -1"]), st.sampled_from(["num_heads", "n_head"]) | _ident,
       st.sampled_from(["head_dim", "d_k"]) | _ident)
def test_split_without_transpose_reaches_matmul(missing, style, kt, hname, dname):
    """ATT401 fires on exactly the splits whose transpose(1, 2) is missing (the (B, L, H, d) tensor
    then attends over the heads axis), at the split, whatever num_heads / head_dim are called; the
    merge is not blamed instead (no ATT402)."""
    if hname == dname:
        return
    src, lines = _split_src(missing, style, kt, hname, dname)
    found = codes(src)
    assert {ln for ln, c in found if c == "ATT401"} == lines, (src, found)
    assert not any(c == "ATT402" for _, c in found), found


def test_flash_layout_split_is_not_att401():
    src = '''
import torch
import torch.nn as nn
from flash_attn import flash_attn_func


class A(nn.Module):
    def __init__(self, dim=32, num_heads=4):
        super().__init__()
        self.num_heads = num_heads
        self.Wqkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        B, L, D = x.shape
        q, k, v = self.Wqkv(x).view(B, L, 3, self.num_heads, D // self.num_heads).unbind(dim=2)
        return flash_attn_func(q, k, v, causal=True).reshape(B, L, D)
'''
    assert codes(src) == []


WHERE = '''
import torch
import torch.nn as nn


class A(nn.Module):
    def __init__(self, embed_dim=32, num_heads=4):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.c_attn = nn.Linear(embed_dim, 3 * embed_dim)

    def forward(self, x, causal_mask, attention_mask):
        B, L, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, L, self.num_heads, self.head_dim).permute(0, 2, 1, 3) for t in (q, k, v))
        w = torch.matmul(q, k.transpose(-1, -2)) / self.head_dim ** 0.5
        {chain}
        w = nn.functional.softmax(w, dim={dim})
        return torch.matmul(w, v)
'''
CHAINS = [
    "w = torch.where(causal_mask, w, torch.finfo(w.dtype).min)",
    "w = torch.where(~causal_mask, torch.finfo(w.dtype).min, w)",
    "w = w.masked_fill(causal_mask, float('-inf'))",
    "w = w + attention_mask",
    "w = w.float()",
    "w = w.to(torch.float32)",
]


@given(st.lists(st.sampled_from(CHAINS), min_size=1, max_size=3), st.sampled_from([-1, 3, 1, 2, -2, 0]))
def test_softmax_axis_through_mask_ops(chain, dim):
    """Rank and key axis flow through torch.where / masked_fill / + mask / .float() / .to():
    ATT301 fires iff the softmax axis of the 4-D scores is not the key axis (3 or -1)."""
    src = WHERE.format(chain="\n        ".join(chain), dim=dim)
    assert ("ATT301" in only_codes(src)) is (dim not in (-1, 3))


def test_dropout_training_true_outside_module_methods():
    src = textwrap.dedent('''
        import torch
        from torch import nn


        def eager_attention_forward(module, query, key, value, scaling, dropout=0.0):
            w = nn.functional.softmax(torch.matmul(query, key.transpose(2, 3)) * scaling, dim=-1)
            w = nn.functional.dropout(w, p=dropout, training={t})
            return torch.matmul(w, value)
    ''')
    assert codes(src.format(t="True")) == [(8, "ATT501")]
    assert codes(src.format(t="module.training")) == []
    assert codes(src.format(t="False")) == []


QUERY_AXIS = '''
import torch
import torch.nn.functional as F
from torch import nn


def l1norm(t, dim=-1, eps=1e-8):
    return F.normalize(t + eps, p=1, dim=dim)


class Slots(nn.Module):
    """Queries (slots) compete for every input over dim 1, then each slot averages its inputs."""

    def __init__(self, d):
        super().__init__()
        self.scale = d ** -0.5
        self.to_q = nn.Linear(d, d)
        self.to_k = nn.Linear(d, d)
        self.to_v = nn.Linear(d, d)

    def forward(self, slots, x):
        q, k, v = self.to_q(slots), self.to_k(x), self.to_v(x)
        dots = torch.einsum("bid,bjd->bij", q, k) * self.scale
        attn = dots.softmax(dim=1)
        attn = {renorm}
        return torch.einsum("bjd,bij->bid", v, attn)
'''


@pytest.mark.parametrize("renorm, expected", [
    ("l1norm(attn)", set()),                                    # helper, default dim=-1
    ("attn / attn.sum(dim=-1, keepdim=True)", set()),
    ("attn / (attn.sum(-1, keepdim=True) + 1e-8)", set()),
    ("F.normalize(attn, p=1, dim=2)", set()),
    ("attn", {"ATT301"}),                                       # no renormalisation
    ("l1norm(attn, dim=1)", {"ATT301"}),                         # over the queries again
    ("attn / attn.sum(dim=1, keepdim=True)", {"ATT301"}),
    ("F.normalize(attn, dim=-1)", {"ATT301"}),                   # p=2: not a sum
])
def test_softmax_over_queries_renormalised_over_keys(renorm, expected):
    """Slot attention (Locatello et al. 2020): softmax over the queries, then renormalised over
    the keys, is a deliberate design; without the renormalisation over the keys it is ATT301."""
    assert only_codes(QUERY_AXIS.format(renorm=renorm)) == expected


def test_softmax_map_over_queries_never_used_with_values_is_not_attention():
    """A soft assignment map over the group tokens, returned for a loss or a plot, is not attention
    weights over keys; the same softmax multiplied with the values is ATT301."""
    src = textwrap.dedent('''
        import torch
        from torch import nn


        class Assign(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.scale = d ** -0.5
                self.q_proj = nn.Linear(d, d)
                self.k_proj = nn.Linear(d, d)

            def forward(self, query, key):
                raw = self.q_proj(query) @ self.k_proj(key).transpose(-2, -1) * self.scale
                soft = nn.functional.softmax(raw, dim=-2)
                return {ret}
    ''')
    assert only_codes(src.format(ret="soft")) == set()
    assert only_codes(src.format(ret="soft @ key")) == {"ATT301"}


@pytest.mark.parametrize("read", ["q.size(-1)", "q.shape[-1]", "k.size(-1)", "key.shape[-1]"])
@pytest.mark.parametrize("expr, expected", [
    ("s = q @ k.transpose(-2, -1) / {d}", {"ATT103"}),
    ("s = q @ k.transpose(-2, -1) * math.sqrt({d})", {"ATT105"}),
    ("s = q @ k.transpose(-2, -1) * {d} ** -0.5", set()),
    ("s = q @ k.transpose(-2, -1) / math.sqrt({d})", set()),
])
def test_head_dim_read_inline_off_q_or_k(read, expr, expected):
    """The head dim written inline as the last axis of the kernel's own q or k (no local name)
    is the contraction width: dividing by it is unrooted, multiplying by its root inverted."""
    names = ("query", "key") if read.startswith("key") else ("q", "k")
    body = expr.format(d=read).replace("q @ k", f"{names[0]} @ {names[1]}")
    src = (f"import math\n\n\ndef attend({names[0]}, {names[1]}, v):\n    {body}\n"
           f"    return s.softmax(dim=-1) @ v\n")
    assert only_codes(src) == expected


KERNEL_DROPOUT = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def attention(q, k, v, {params}):
    w = torch.softmax(q @ k.transpose(-2, -1) * q.size(-1) ** -0.5, dim=-1)
    w = {drop}
    return w @ v


class Attention(nn.Module):
    def __init__(self, p=0.1):
        super().__init__()
        self.p = p

    def forward(self, q, k, v):
        return {call}
'''
KERNEL_DROPOUT_CASES = [
    # (kernel parameters, dropout call, caller, ATT501 expected)
    ("p=0.1", "F.dropout(w, p)", "attention(q, k, v)", True),          # the default drops in eval()
    ("p=0.1", "F.dropout(w, 0.1)", "attention(q, k, v)", True),        # a constant
    ("dropout_p=0.0", "F.dropout(w, dropout_p)", "attention(q, k, v, self.p)", True),  # ungated by the caller
    ("dropout_p=0.0", "F.dropout(w, p=dropout_p)", "attention(q, k, v, dropout_p=self.p)", True),
    ("dropout_p=0.0", "F.dropout(w, dropout_p)", "attention(q, k, v, self.p if self.training else 0.0)", False),
    ("dropout_p=0.0", "F.dropout(w, dropout_p)", "attention(q, k, v)", False),  # 0.0 by default
    ("p=0.1", "F.dropout(w, p)", "attention(q, k, v, 0.0 if not self.training else self.p)", False),
    ("p=0.1, training=False", "F.dropout(w, p, training=training)", "attention(q, k, v, training=self.training)", False),
    ("p=0.1", "F.dropout(w, p, training=True)", "attention(q, k, v)", False),  # written out: deliberate
    ("dropout_p", "F.dropout(w, dropout_p)", "self.p", False),  # no caller here: the callers' business
]


@pytest.mark.parametrize("params,drop,call,fires", KERNEL_DROPOUT_CASES, ids=range(len(KERNEL_DROPOUT_CASES)))
def test_dropout_in_an_attention_kernel_function(params, drop, call, fires):
    """F.dropout defaults to training=True: in a kernel function outside any module the
    probability must be zero in eval() (gated by its callers), or a training flag passed in."""
    src = KERNEL_DROPOUT.format(params=params, drop=drop, call=call)
    assert (only_codes(src) == {"ATT501"}) is fires, codes(src)


def test_dropout_in_a_kernel_message_names_the_call():
    src = KERNEL_DROPOUT.format(params="dropout_p=0.0", drop="F.dropout(w, dropout_p)",
                                call="attention(q, k, v, dropout_p=self.p)")
    (f,) = [f for f in lint_source(src, "t.py") if f.code == "ATT501"]
    assert "the call on line 19 passes dropout_p=self.p" in f.message and f.line == 9


HEAD_DIM_NAMED = '''
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.{hd} = dim // heads
        self.to_qkv = nn.Linear(dim, dim * 3)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(b, n, self.heads, self.{hd}).transpose(1, 2) for t in (q, k, v))
        s = {scores}
        return s.softmax(-1) @ v
'''


@pytest.mark.parametrize("hd", ["dim_head", "d_k", "head_size", "head_dim"])
@pytest.mark.parametrize("scores,code", [
    ("q @ k.transpose(-2, -1)", "ATT101"),
    ("(q * self.{hd} ** -0.5) @ k.transpose(-2, -1) * self.{hd} ** -0.5", "ATT104"),
    ("q @ k.transpose(-2, -1) * self.{hd} ** 0.5", "ATT105"),
])
def test_scale_messages_use_the_code_s_own_head_dim_name(hd, scores, code):
    src = HEAD_DIM_NAMED.format(hd=hd, scores=scores.format(hd=hd))
    (f,) = [f for f in lint_source(src, "t.py") if f.code.startswith("ATT1")]
    assert f.code == code
    assert f"self.{hd} ** -0.5" in f.message or f"√self.{hd}" in f.message
    if hd != "head_dim":
        assert "head_dim" not in f.message


UNFLATTEN_SPLIT = '''
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, dim * 3)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        {split}
        x = F.scaled_dot_product_attention(q, k, v)
        return {merge}
'''


@pytest.mark.parametrize("split", [
    "q, k, v = [t.unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2) for t in (q, k, v)]",
    "q, k, v = map(lambda t: t.unflatten(-1, (self.num_heads, -1)).transpose(1, 2), (q, k, v))",
])
@pytest.mark.parametrize("merge,code", [
    ("x.reshape(B, N, -1)", {"ATT402"}),
    ("x.reshape(B, N, C)", {"ATT402"}),
    ("x.transpose(1, 2).reshape(B, N, -1)", set()),
    ("x.transpose(1, 2).flatten(2)", set()),
])
def test_head_merge_after_an_unflatten_split_of_the_projection(split, merge, code):
    """``t.unflatten(-1, (H, d))`` of a (B, L, H·d) projection is (B, L, H, d): after
    ``transpose(1, 2)`` the heads come before the tokens, and a merge must move them back."""
    assert only_codes(UNFLATTEN_SPLIT.format(split=split, merge=merge)) == code
