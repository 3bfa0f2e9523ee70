"""Position terms found by experiment (attncheck/dynamic/positions.py): Transformer-XL relative
attention with names that say nothing about positions (fixtures/dynamic/relative_attention.py),
absolute position embeddings, and tokens mixed before attention (a bug, not a position term)."""
import torch
import torch.nn as nn
from _dynamic_helpers import load
from hypothesis import given, settings
from hypothesis import strategies as st

import attncheck
from attncheck.dynamic.positions import detect_positions, draw_permutation
from attncheck.dynamic.targets import target

fx = load("dynamic/relative_attention.py")
tb = load("lint/correct/textbook_mha.py")


def _check(obj, checks, **hints):
    return attncheck.check(obj, checks=checks, device="cpu", max_examples=2, timeout=60, **hints)


@settings(max_examples=20)
@given(st.integers(1, 9), st.integers(1, 3))
def test_rel_shift_puts_distance_i_minus_j_in_column_j(L, B):
    # the table's column m holds distance L-1-m; after the shift entry (i, j) holds i - j
    P = 2 * L - 1
    dist = torch.arange(L - 1, -L, -1.0)
    x = dist.expand(B, 2, L, P).clone() + 100 * torch.arange(L)[:, None]   # row tag
    y = fx.rel_shift(x)[..., :L]
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    assert torch.equal(y, ((i - j) + 100 * i).to(y).expand(B, 2, L, L))


class AbsolutePositionAttention(nn.Module):
    """Learned absolute position embeddings added to the input, then plain attention."""

    def __init__(self, width=32, groups=4, longest=64):
        super().__init__()
        self.table = nn.Parameter(torch.randn(longest, width))
        self.inner = tb.MultiHeadAttention(d_model=width, num_heads=groups)

    def forward(self, x):
        x = x + self.table[: x.shape[1]]
        return self.inner(x, x, x)[0]


def test_position_terms_detected_by_experiment_whatever_the_names():
    torch.manual_seed(0)
    xl = detect_positions(target(fx.BidirectionalCellAttention(), causal=False))
    assert xl["kind"] == "relative" and xl["source"] == "detected"
    assert "the same after dropping the first token" in xl["message"]
    causal_xl = detect_positions(target(fx.RecurrenceCellAttention(), causal=True))
    assert causal_xl["kind"] == "relative"
    absolute = detect_positions(target(AbsolutePositionAttention(), causal=False))
    assert absolute["kind"] == "absolute" and "not shift-invariant" in absolute["message"]
    plain = detect_positions(target(tb.MultiHeadAttention(d_model=32, num_heads=4), causal=False))
    assert plain["kind"] == "none"


def test_tokens_mixed_before_attention_are_not_a_position_term():
    # the causal table in a bidirectional layer: keys after the query read the next query's row
    found = detect_positions(target(fx.BidirectionalCellAttentionCausalShift(), causal=False))
    assert found["kind"] == "none" and "mixed before attention" in found["message"]


def test_transformer_xl_layers_pass_and_the_causal_shift_bug_fails():
    torch.manual_seed(0)
    rep = _check(fx.BidirectionalCellAttention(), ["gradient-flow", "permutation-equivariance"],
                 causal=False)
    gf, pe = rep.results
    assert gf.status == "pass" and "offer.bias" in gf.metrics["no_effect"], gf.message
    assert pe.status == "skip" and "relative position bias" in pe.message \
        and "(detected)" in pe.message
    rep = _check(fx.RecurrenceCellAttention(), ["causality", "gradient-flow"], causal=True)
    assert [r.status for r in rep.results] == ["pass", "pass"], [r.message for r in rep.results]
    bad = _check(fx.BidirectionalCellAttentionCausalShift(), ["permutation-equivariance"],
                 causal=False).results[0]
    assert bad.status == "fail" and bad.metrics["fail_max_abs_diff"] > 1e-3
    assert "mixed before attention" in bad.metrics["position_experiment"]


def test_positional_false_still_forces_the_check_on_a_detected_term():
    r = _check(fx.BidirectionalCellAttention(), ["permutation-equivariance"], causal=False,
               positional=False).results[0]
    assert r.status == "fail" and r.metrics["fail_max_abs_diff"] > 1e-3


def test_draw_permutation_is_shared_with_the_check():
    from attncheck.dynamic.checks import permutation_equivariance as pe

    assert pe.draw_permutation is draw_permutation
