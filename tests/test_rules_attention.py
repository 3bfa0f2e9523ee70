"""ATT101–105 (scale), ATT301 (softmax axis), ATT401/402 (head layout), ATT501 (dropout in eval).

Properties: a generated attention layer with a scale of a given exponent / dimension / spelling /
position raises exactly the code an independent oracle predicts; softmax over every axis of 3-D
and 4-D scores fires iff the axis is not the key axis; head splits fire iff L and H swap.
"""
from __future__ import annotations

import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
import torch.nn as nn


class A(nn.Module):
    def __init__(self, dim=32, num_heads=4):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        y = self.proj(x){op}
        return y
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
    assert only_codes(HEADS.format(op=op)) == expected


DROP = '''
import torch.nn as nn
import torch.nn.functional as F


class A(nn.Module):
    def __init__(self, p=0.1):
        super().__init__()
        self.p = p
        self.drop = nn.Dropout(p)

    def forward(self, q, k, v, w, dropout_p=0.1):
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


def test_dropout_outside_module_is_not_flagged():
    src = "import torch.nn.functional as F\n\ndef f(w, p):\n    return F.dropout(w, p)\n"
    assert codes(src) == []


def test_dropout_under_training_guard():
    src = DROP.format(pre="if not self.training:\n            dropout_p = 0.0",
                      call="F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)")
    assert codes(src) == []
    src = DROP.format(pre="if self.training:\n            w = F.dropout(w, self.p)", call="w")
    assert codes(src) == []
