"""Stacks of a composite transformers model audited through their parent: BLT's local encoder,
global transformer and local decoder are fed what BltModel computes (byte embeddings, patch
ids, the masks it builds).  Each builds the whole tiny BLT, so these are slow."""
import pytest

pytest.importorskip("transformers")

import attncheck  # noqa: E402


@pytest.mark.slow
def test_local_encoder_is_fed_by_its_parent_and_follows_the_patch_masks_it_is_given():
    rep = attncheck.audit("hf:blt_local_encoder", checks="mask-pattern")
    for variant in ("eager", "sdpa"):
        r = rep[f"mask-pattern[{variant}]"]
        assert r.status == "pass", r.message
        # the self-attention runs the window of the parent's local_attention_window_len; the
        # cross-attention (patches as queries, cross_attn_k of them per patch) the patch mask
        assert [lay["observed"] for lay in r.metrics["layers"]] == ["sliding window 4", "other"]


@pytest.mark.slow
def test_composite_expects_the_windows_its_nested_configs_declare():
    rep = attncheck.audit("hf:blt", checks="mask-pattern")
    layers = rep["mask-pattern[sdpa]"].metrics["layers"]
    # patcher (its own sliding_window, 2 layers) and local encoder (local_attention_window_len):
    # a window each, met
    assert [(lay["expected"], lay["ok"]) for lay in layers[:3]] == [("sliding window 4", True)] * 3
    # the two self-attention layers of the local decoder run the encoder's window while the
    # decoder's config declares none (docs/audit.md, BLT): the only mismatches
    assert [lay["observed"] for lay in layers if not lay["ok"]] == ["sliding window 4"] * 2
