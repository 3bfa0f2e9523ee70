"""The ``causality`` check: exact leak maps, current-token visibility, alignment."""
import torch
from _dynamic_helpers import load
from hypothesis import given
from hypothesis import strategies as st

import attncheck
from attncheck.dynamic.base import RunContext
from attncheck.dynamic.checks.causality import DEFAULT_L, _query_delta, check_causality
from attncheck.dynamic.targets import target

K = load("dynamic/probe_kernels.py")
Ly = load("dynamic/probe_layers.py")

L = DEFAULT_L
STRICT_UPPER = torch.ones(L, L, dtype=torch.int64).triu(1).tolist()
ZEROS = [[0] * L for _ in range(L)]


def run(obj, **hints):
    return attncheck.check(obj, checks=["causality"], device="cpu", **hints)["causality"]


def band(w):
    """Leak map of a mask letting query i see keys up to i + w."""
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    return ((j > i) & (j <= i + w)).to(torch.int64).tolist()


def test_correct_causal_sdpa_kernel_passes_with_all_zero_leak_map():
    r = run(K.causal_sdpa, causal=True)
    assert r.status == "pass", r.message
    assert r.metrics["leak_map"] == ZEROS
    assert r.metrics["max_delta"] == 0.0            # exact: masked keys contribute exactly 0
    assert r.metrics["tolerance"] == 0.0 and r.metrics["control_jitter"] == 0.0
    assert r.metrics["hidden_diagonal"] == [] and r.metrics["n_leaks"] == 0
    assert r.metrics["observed_pattern"] == "causal"
    assert r.metrics["cross"]["matches"] == ["top_left"]
    assert "top-left" in r.message


def test_is_causal_false_kernel_declared_causal_leaks_the_strict_upper_triangle():
    r = run(K.causal_flag_ignored, causal=True)
    assert r.status == "fail"
    assert r.metrics["leak_map"] == STRICT_UPPER
    assert r.metrics["n_leaks"] == L * (L - 1) // 2
    assert r.metrics["first_leak"] == [0, 1]
    i, j = r.metrics["worst_leak"]
    assert f"query {i} depends on key {j}" in r.message
    assert r.metrics["max_delta"] > 0.05
    assert "reproduce:" in r.details


def test_plain_sdpa_declared_causal_gets_is_causal_and_passes():
    r = run(torch.nn.functional.scaled_dot_product_attention, causal=True)
    assert r.status == "pass" and r.metrics["leak_map"] == ZEROS


def test_off_by_one_window_leaks_exactly_one_diagonal():
    r = run(K.window_leak, causal=True)
    assert r.status == "fail"
    assert r.metrics["leak_map"] == band(1)
    assert r.metrics["n_leaks"] == L - 1


def test_exact_comparison_in_low_precision():
    for dtype in ("bfloat16", "float16"):
        r = attncheck.check(K.window_leak, checks=["causality"], device="cpu", dtype=dtype,
                            causal=True)["causality"]
        assert r.status == "fail" and r.metrics["leak_map"] == band(1), dtype
        r = attncheck.check(K.causal_handwritten, checks=["causality"], device="cpu",
                            dtype=dtype, causal=True)["causality"]
        assert r.status == "pass" and r.metrics["max_delta"] == 0.0, dtype


@given(st.integers(0, 4))
def test_leak_map_is_exactly_the_band_a_window_mask_opens(w):
    def windowed(q, k, v):
        i = torch.arange(q.size(-2))[:, None]
        j = torch.arange(k.size(-2))[None, :]
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=j <= i + w)

    r = check_causality(target(windowed, causal=True), RunContext(check="causality"))
    assert r.metrics["leak_map"] == band(w)
    assert r.status == ("pass" if w == 0 else "fail")


def test_diagonal_masking_handwritten_hides_current_token_and_nans_row_0():
    r = run(K.diagonal_masked, causal=True)
    assert r.status == "fail"
    assert "current token hidden" in r.message
    assert r.metrics["hidden_diagonal"] == list(range(L))
    assert r.metrics["nan_rows"] == [0]
    assert r.metrics["leak_map"] == ZEROS             # over-masking, not a leak


def test_diagonal_masking_sdpa_is_silent_but_caught():
    r = run(K.diagonal_masked_sdpa, causal=True)
    assert r.status == "fail" and "current token hidden" in r.message
    assert r.metrics["hidden_diagonal"] == list(range(L))
    assert "nan_rows" not in r.metrics                 # SDPA returns 0 for the empty row


def test_diagonal_masking_layer_detected_from_probe_weights():
    r = run(Ly.ProbeMHA(32, 4, mask="diagonal"), causal=True)
    assert r.status == "fail" and "current token hidden" in r.message
    assert r.metrics["hidden_diagonal"] == list(range(L))
    assert r.metrics["hidden_diagonal_source"] == "attention weights (probe)"


def test_layer_bugs_leak_maps():
    r = run(Ly.ProbeMHA(32, 4, mask="window"), causal=True)
    assert r.status == "fail" and r.metrics["leak_map"] == band(1)
    r = run(Ly.ProbeMHA(32, 4, mask="inverted"), causal=True)
    assert r.status == "fail" and r.metrics["leak_map"] == STRICT_UPPER
    r = run(Ly.CausalConvMixLeak(), causal=True)       # leak outside the softmax
    assert r.status == "fail" and r.metrics["leak_map"] == band(1)


def test_correct_layers_pass():
    for obj in (Ly.ProbeMHA(32, 4, mask="causal"),
                Ly.ProbeMHA(32, 4, mask="causal", scale="sdpa"),
                Ly.NanoCausalSelfAttention()):
        r = run(obj, causal=True)
        assert r.status == "pass", (type(obj).__name__, r.message)
        assert r.metrics["leak_map"] == ZEROS and r.metrics["hidden_diagonal"] == []


def test_torch_mha_and_encoder_layer_with_causal_mask_pass():
    r = run(torch.nn.MultiheadAttention(16, 2, batch_first=True), causal=True)
    assert r.status == "pass", r.message
    assert r.metrics["leak_map"] == ZEROS
    enc = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)   # dropout 0.1
    r = run(enc, causal=True)                          # eval mode: dropout off
    assert r.status == "pass", r.message
    assert enc.training                                # restored after the run


def test_bottom_right_alignment_warns_by_default_and_passes_when_declared():
    r = run(K.causal_bottom_right, causal=True)
    assert r.status == "warn"
    assert "bottom-right" in r.message and "top-left" in r.message
    assert r.metrics["cross"]["matches"] == ["bottom_right"]
    r = run(K.causal_bottom_right, causal=True, alignment="bottom_right")
    assert r.status == "pass" and "bottom-right alignment (declared)" in r.message


def test_top_left_kernel_declared_bottom_right_fails():
    r = run(K.causal_sdpa, causal=True, alignment="bottom_right")
    assert r.status == "fail"
    assert "follows top-left alignment, not bottom-right" in r.message
    assert r.metrics["cross"]["hidden_diagonal"]["bottom_right"] == [0, 1, 2, 3, 4]


def test_declared_non_causal_that_masks_the_future_warns():
    r = run(K.causal_sdpa, causal=False)
    assert r.status == "warn" and "masks the future" in r.message
    r = run(K.full_sdpa, causal=False)
    assert r.status == "pass" and r.metrics["future_visible_pairs"] == L * (L - 1) // 2


def test_undeclared_targets_are_detected_or_skipped():
    r = run(K.causal_sdpa)                             # probe: SDPA is_causal=True
    assert r.status == "pass" and "detected" in r.metrics["causal"]
    r = run(K.full_sdpa)
    assert r.status == "skip" and "full" in r.message


def test_opaque_causal_kernel_still_checked_by_perturbation():
    r = run(K.causal_manual_softmax, causal=True)
    assert r.status == "pass" and r.metrics["hidden_diagonal"] == []
    r = run(Ly.ManualSoftmaxLayer(), causal=True)      # non-causal layer declared causal
    assert r.status == "fail" and r.metrics["leak_map"] == STRICT_UPPER


def test_query_delta_compares_nan_explicitly():
    a = torch.tensor([[1.0, float("nan")], [2.0, 3.0], [float("nan"), 1.0]])
    b = torch.tensor([[1.0, float("nan")], [2.0, float("nan")], [float("nan"), 1.5]])
    d = _query_delta(a, b, 0)
    assert d.tolist() == [0.0, float("inf"), 0.5]


class _SequenceFirstMHAFedBatchFirst(torch.nn.Module):
    """Default (sequence-first) nn.MultiheadAttention fed (B, L, E): attends along the batch axis,
    with no causal mask at all."""

    def __init__(self, d_model=32, num_heads=2):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(d_model, num_heads)

    def forward(self, x):
        return self.attn(x, x, x)[0]


def test_layer_mixing_along_the_batch_axis_fails_instead_of_passing():
    torch.manual_seed(0)
    r = run(_SequenceFirstMHAFedBatchFirst(), causal=True)
    assert r.status == "fail", r.message
    assert "batch_first" in r.message and "batch axis" in r.message
    assert r.metrics["batch_delta"] > 0.1


def test_correct_layer_control_is_unchanged_by_the_perturbed_batch_rows():
    r = run(torch.nn.MultiheadAttention(32, 2, batch_first=True), causal=True)
    assert r.status == "pass", r.message
    assert r.metrics["batch_delta"] < 1e-5
