"""``padding``: padded keys are invisible; padded batch equals the unpadded runs."""
import torch
import torch.nn.functional as F
from _check_helpers import run, run_case
from hypothesis import given
from hypothesis import strategies as st

from attncheck.dynamic.checks.padding import padding_keep


def sdpa(q, k, v, attn_mask=None, is_causal=False):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)


@given(st.lists(st.integers(0, 9), min_size=1, max_size=4), st.sampled_from(["left", "right"]))
def test_padding_keep_counts(lengths, side):
    keep = padding_keep(lengths, 9, side)
    assert keep.shape == (len(lengths), 1, 1, 9)
    assert keep.sum(dim=-1).flatten().tolist() == lengths
    for b, n in enumerate(lengths):
        row = keep[b, 0, 0]
        if 0 < n < 9:   # real tokens are contiguous at the start (right) / end (left)
            assert bool(row[0]) == (side == "right") and bool(row[-1]) == (side == "left")


def test_sdpa_kernel_passes_exactly():
    r = run(sdpa, "padding", causal=False)
    assert r.status == "pass", r.message
    assert r.metrics["perturb_max_delta"] == 0.0
    assert r.metrics["lengths"] == [8, 5, 0] and r.metrics["nonfinite_fully_padded"] == []
    assert all(d <= 1e-6 for d in r.metrics["unpadded_max_diff"].values())


def test_sdpa_kernel_left_padding_causal_passes():
    r = run(sdpa, "padding", causal=True, padding_side="left")
    assert r.status == "pass", r.message
    assert r.metrics["padding_side"] == "left"


def test_mha_passes_with_layer_lengths():
    r = run(torch.nn.MultiheadAttention(16, 2, batch_first=True), "padding")
    assert r.status == "pass", r.message
    assert r.metrics["lengths"] == [8, 5, 3] and r.metrics["n_leaks"] == 0


def test_inverted_mask_b30_leaks_at_real_positions():
    r = run_case("b30_inverted_padding_mask", "padding")
    assert r.status == "fail"
    assert r.metrics["n_leaks"] > 0 and r.metrics["perturb_max_delta"] > 0.1
    assert [1, 0] in r.metrics["leak_positions"]
    assert 0 in r.metrics["nonfinite_real_samples"]     # the unpadded sample: every key blocked


def test_bool_mask_added_b37_leaks():
    r = run_case("b37_bool_mask_added_as_float", "padding")
    assert r.status == "fail" and "leak" in r.message
    assert r.metrics["n_leaks"] >= 5


def test_fully_padded_row_b14_nan():
    r = run_case("b14_fully_masked_row_nan", "padding")
    assert r.status == "fail"
    assert r.metrics["nonfinite_fully_padded"] == [2] and r.metrics["n_leaks"] == 0


def test_left_pad_absolute_positions_b35_differs_from_unpadded():
    r = run_case("b35_left_pad_absolute_positions", "padding")
    assert r.status == "fail" and "unpadded" in r.message
    diffs = r.metrics["unpadded_max_diff"]
    assert diffs["0"] < 1e-5            # the full-length sample has no padding
    assert diffs["1"] > 0.1 and diffs["2"] > 0.1


def test_no_mask_argument_skips():
    r = run(lambda q, k, v: sdpa(q, k, v), "padding", kind="kernel")
    assert r.status == "skip" and "mask" in r.message
