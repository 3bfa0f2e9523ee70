"""``permutation-equivariance``: f(x[:, p]) = f(x)[:, p]."""
import torch
import torch.nn.functional as F
from _dynamic_helpers import load
from _check_helpers import run, run_case
from hypothesis import given
from hypothesis import strategies as st

from attncheck.dynamic.checks.permutation_equivariance import draw_permutation
from attncheck.dynamic.spec import build


@given(st.integers(1, 40), st.integers(0, 2**31 - 1))
def test_draw_permutation_moves_everything(n, seed):
    p = draw_permutation(n, seed)
    assert sorted(p.tolist()) == list(range(n))
    if n >= 2:
        assert not bool((p == torch.arange(n)).any())


def test_textbook_mha_passes():
    mod = load("lint/correct/textbook_mha.py")
    r = run(build(mod.MultiHeadAttention, "x"), "permutation-equivariance",
            **mod.DYNAMIC["hints"])
    assert r.status == "pass", r.message
    assert r.metrics["max_abs_diff"] < 1e-5


def test_sdpa_kernel_passes():
    r = run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), "permutation-equivariance",
            kind="kernel", causal=False)
    assert r.status == "pass" and r.metrics["max_abs_diff"] < 1e-5


def test_split_heads_view_b23_fails_with_permutation():
    r = run_case("b23_split_heads_view_no_transpose", "permutation-equivariance")
    assert r.status == "fail"
    assert r.metrics["fail_max_abs_diff"] > 0.01
    p = r.metrics["permutation"]
    assert sorted(p) == list(range(len(p))) and len(p) >= 2


def test_layout_mismatch_b41_fails():
    r = run_case("b41_layout_bhld_vs_blhd", "permutation-equivariance")
    assert r.status == "fail" and r.metrics["fail_max_abs_diff"] > 0.01


def test_positional_skip():
    r = run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), "permutation-equivariance",
            kind="kernel", positional=True)
    assert r.status == "skip" and "positions" in r.message
    r = run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            "permutation-equivariance", kind="kernel", causal=True, positional=True)
    assert r.status == "skip" and "positions" in r.message


def _window_kernel(w):
    def kernel(q, k, v, is_causal=False):
        L = q.size(-2)
        i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=(j <= i) & (j > i - w))
    return kernel


class _CausalLayer(torch.nn.Module):
    """Causal self-attention; ``transpose=False`` splits heads with a bare ``reshape``."""

    def __init__(self, transpose: bool, d_model: int = 16, num_heads: int = 4):
        super().__init__()
        self.num_heads, self.embed_dim, self.transpose = num_heads, d_model, transpose
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)

    def forward(self, x):
        B, L, E = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if self.transpose:
            q, k, v = (t.view(B, L, self.num_heads, -1).transpose(1, 2) for t in (q, k, v))
        else:
            q, k, v = (t.reshape(B, self.num_heads, L, -1) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(B, L, E)


def test_causal_targets_keep_a_permuted_prefix_out_of_later_rows():
    """Causal attention sees its past as a set: permuting tokens 0…m−1 leaves rows ≥ m alone."""
    k = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    r = run(k, "permutation-equivariance", kind="kernel", causal=True)
    assert r.status == "pass" and r.metrics["causal_prefix"] and r.metrics["max_abs_diff"] < 1e-5
    r = run(_CausalLayer(True), "permutation-equivariance", causal=True)
    assert r.status == "pass", r.message
    r = run(_CausalLayer(False), "permutation-equivariance", causal=True)
    assert r.status == "fail" and "causal prefix not treated as a set" in r.message
    assert r.metrics["worst_row"] >= r.metrics["prefix"]


def test_causal_sliding_window_is_not_judged_by_prefix_permutations():
    """A window narrower than L hides token 0 from the last row: nothing to conclude."""
    r = run(_window_kernel(2), "permutation-equivariance", kind="kernel", causal=True)
    assert r.status == "skip" and "sliding window" in r.message
    r = run(_window_kernel(2), "permutation-equivariance", kind="kernel", causal=True, window=2,
            pattern="sliding_window")
    assert r.status == "skip" and "declared mask pattern" in r.message


def test_undeclared_causal_is_detected_and_skipped():
    k = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    r = run(k, "permutation-equivariance", kind="kernel")
    assert r.status == "skip" and "is_causal=True" in r.metrics["causal_evidence"]


def test_relative_position_bias_is_detected():
    mod = load("lint/correct/t5_unscaled.py")
    obj = build(getattr(mod, mod.DYNAMIC["target"]), "t5")
    r = run(obj, "permutation-equivariance", **mod.DYNAMIC["hints"])
    # found in the logits (an additive bias that depends on i − j only), not by name
    assert r.status == "skip" and "relative position bias (detected)" in r.message
    forced = run(obj, "permutation-equivariance", positional=False, **mod.DYNAMIC["hints"])
    assert forced.status == "fail" and forced.metrics["fail_max_abs_diff"] > 1e-3
