"""The ``scale`` check: effective softmax scale vs 1/√head_dim, and the named cause."""
import math

import pytest
import torch
from _dynamic_helpers import load
from hypothesis import given
from hypothesis import strategies as st

import attncheck
from attncheck.dynamic.base import RunContext
from attncheck.dynamic.checks.scale import check_scale, classify_scale
from attncheck.dynamic.targets import target

K = load("dynamic/probe_kernels.py")
Ly = load("dynamic/probe_layers.py")

CAUSE = {
    "correct": None,
    "missing": "missing: logits not scaled",
    "d_model": "d_model instead of head_dim",
    "unrooted": "1/d_k: not square-rooted, or 1/√d_k applied twice",
    "twice": "1/d_k: not square-rooted, or 1/√d_k applied twice",
    "inverted": "inverted: multiplied by √d_k",
}


def run(obj, **hints):
    return attncheck.check(obj, checks=["scale"], device="cpu", **hints)["scale"]


@given(variant=st.sampled_from(sorted(CAUSE)),
       style=st.sampled_from(["div", "preq", "sdpa", "einsum", "baddbmm"]),
       d=st.sampled_from([2, 4, 8, 16, 32, 64]), H=st.integers(1, 4))
def test_each_misscaled_kernel_is_named(variant, style, d, H):
    if H == d:                      # 1/√(H·d) = 1/d: both causes would be named (tested below)
        H += 1
    t = target(K.scaled_kernel(variant, style), head_dim=d, num_heads=H)
    r = check_scale(t, RunContext(check="scale"))
    want = K.SCALE_VARIANTS[variant](d, H)
    (att,) = r.metrics["attentions"]
    assert att["effective_scale"] == pytest.approx(want, rel=1e-4)
    assert att["head_dim"] == d
    if variant == "correct" or (variant == "d_model" and H == 1):
        assert r.status == "pass", r.message
    else:
        assert r.status == "fail"
        assert CAUSE[variant] in r.message, r.message
        assert f"1/√{d}" in r.message


def test_textbook_layer_variants_at_d_model_512():
    for mode in ("correct", "preq", "sdpa"):
        r = run(Ly.ProbeMHA(512, 8, scale=mode))
        assert r.status == "pass", (mode, r.message)
        assert r.metrics["attentions"][0]["effective_scale"] == pytest.approx(0.125, rel=1e-4)
    for mode, s in (("missing", 1.0), ("d_model", 1 / math.sqrt(512)), ("unrooted", 1 / 64),
                    ("twice", 1 / 64), ("inverted", 8.0)):
        r = run(Ly.ProbeMHA(512, 8, scale=mode))
        assert r.status == "fail"
        assert r.metrics["effective_scale"] == pytest.approx(s, rel=1e-4)
        assert CAUSE[mode] in r.message and "head_dim 64" in r.message


def test_nanogpt_torch_mha_and_encoder_layer_pass():
    r = run(Ly.NanoCausalSelfAttention())
    assert r.status == "pass" and r.metrics["attentions"][0]["source"] == "matmul"
    r = run(torch.nn.MultiheadAttention(32, 4, batch_first=True))
    assert r.status == "pass" and r.metrics["attentions"][0]["source"] == "mha"
    assert r.metrics["attentions"][0]["effective_scale"] == pytest.approx(1 / math.sqrt(8))


def test_declared_scale_hint():
    r = run(K.scaled_kernel("missing"), scale=1.0)        # T5: intentionally unscaled
    assert r.status == "pass" and "declared" in r.message
    r = run(K.scaled_kernel("correct"), scale=1.0)        # declared 1.0 but scaled by 1/√d
    assert r.status == "fail" and "instead of the declared scale" in r.message
    r = run(K.scaled_kernel("missing"), scale="1.0")      # as given by --hint scale=1.0
    assert r.status == "pass"
    r = run(K.scaled_kernel("inverted"), scale="learned")
    assert r.status == "skip" and "not judged" in r.message


def test_opaque_kernel_scale_read_through_identity_v():
    def reciprocal_unscaled(q, k, v):
        s = q @ k.transpose(-2, -1)
        w = torch.exp(s - s.amax(-1, keepdim=True))
        return (w * w.sum(-1, keepdim=True).reciprocal()) @ v

    r = run(K.reciprocal_softmax)
    assert r.status == "pass" and r.metrics["attentions"][0]["source"] == "log-prob fit"
    r = run(reciprocal_unscaled)
    assert r.status == "fail" and CAUSE["missing"] in r.message


def test_hand_written_softmax_scale_read_from_the_probe():
    """exp / sum softmaxes are followed by the probe: the scale comes from the q·kᵀ matmul."""
    def manual_unscaled(q, k, v):
        s = q @ k.transpose(-2, -1)
        w = torch.exp(s - s.amax(-1, keepdim=True))
        return (w / w.sum(-1, keepdim=True)) @ v

    r = run(K.manual_softmax)
    assert r.status == "pass" and r.metrics["attentions"][0]["source"] == "matmul"
    r = run(manual_unscaled)
    assert r.status == "fail" and CAUSE["missing"] in r.message
    r = run(Ly.ManualSoftmaxLayer())
    assert r.status == "pass" and r.metrics["effective_scale"] == pytest.approx(1 / math.sqrt(8), rel=1e-4)


def test_unobservable_layer_is_skipped_not_passed():
    r = run(Ly.ReciprocalSoftmaxLayer())
    assert r.status == "skip" and r.message.startswith("not observable")


def test_classify_scale_ambiguities_and_unknowns():
    ok, why = classify_scale(1 / 4, head_dim=4, num_heads=4)
    assert not ok and "1/d_k" in why and "d_model instead of head_dim" in why
    ok, why = classify_scale(0.3, head_dim=16, num_heads=2)
    assert not ok and why.startswith("unrecognised")
    assert classify_scale(1 / math.sqrt(64) * 1.01, 64)[0]
    assert not classify_scale(1 / math.sqrt(64) * 1.05, 64)[0]
    assert classify_scale(float("nan"), 8) == (False, "non-finite scale nan")
