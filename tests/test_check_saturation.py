"""The ``saturation`` check and its row statistics."""
import math

import pytest
import torch
from _dynamic_helpers import load
from hypothesis import given
from hypothesis import strategies as st

import attncheck
from attncheck.dynamic.checks.saturation import FAIL_ENTROPY, WARN_ENTROPY, row_stats

K = load("dynamic/probe_kernels.py")
Ly = load("dynamic/probe_layers.py")


def run(obj, **hints):
    return attncheck.check(obj, checks=["saturation"], device="cpu", **hints)["saturation"]


def test_unscaled_512_wide_layer_fails_textbook_passes():
    good = run(Ly.ProbeMHA(512, 8, scale="correct"))
    assert good.status == "pass", good.message
    assert good.metrics["entropy_norm_mean"] > 0.95
    assert good.metrics["saturated_share"] == 0.0
    assert good.metrics["logit_std"] < 0.5
    bad = run(Ly.ProbeMHA(512, 8, scale="missing"))
    assert bad.status == "fail", bad.message
    assert bad.metrics["entropy_norm_mean"] < FAIL_ENTROPY
    assert bad.metrics["logit_std"] > 2.0
    assert "1/√d_k" in bad.message
    inv = run(Ly.ProbeMHA(512, 8, scale="inverted"))
    assert inv.status == "fail" and inv.metrics["saturated_share"] > 0.5
    assert inv.metrics["jacobian_fro_mean"] < good.metrics["jacobian_fro_mean"]


def test_correct_targets_pass():
    for obj in (Ly.NanoCausalSelfAttention(),
                torch.nn.MultiheadAttention(64, 4, batch_first=True),
                K.causal_sdpa, torch.nn.functional.scaled_dot_product_attention):
        r = run(obj)
        assert r.status == "pass", (getattr(obj, "__name__", type(obj).__name__), r.message)
        assert r.metrics["entropy_norm_mean"] > WARN_ENTROPY


def test_opaque_kernel_read_through_identity_v():
    r = run(K.reciprocal_softmax)
    assert r.status == "pass" and r.metrics["source"] == "V = identity"
    assert r.metrics["entropy_norm_mean"] == pytest.approx(
        run(K.full_sdpa).metrics["entropy_norm_mean"], abs=1e-6)


def test_unobservable_layer_is_skipped():
    r = run(Ly.ReciprocalSoftmaxLayer())
    assert r.status == "skip" and "not observable" in r.message


@given(st.integers(2, 40), st.integers(1, 5))
def test_row_stats_uniform_and_one_hot(n, rows):
    u = torch.full((rows, n), 1.0 / n)
    s = row_stats(u)
    assert s["rows"] == rows and s["saturated_share"] == 0.0
    assert s["entropy_norm_mean"] == pytest.approx(1.0)
    assert s["jacobian_fro_mean"] == pytest.approx(math.sqrt(1 / n - 1 / n ** 2))
    assert s["jacobian_fro_uniform"] == pytest.approx(s["jacobian_fro_mean"])
    oh = torch.zeros(rows, n)
    oh[:, 0] = 1.0
    s = row_stats(oh, visible=torch.ones(rows, n, dtype=torch.bool))
    assert s["saturated_share"] == 1.0 and s["entropy_norm_mean"] == pytest.approx(0.0)
    assert s["jacobian_fro_mean"] == 0.0 and s["dead_gradient_share"] == 1.0


def test_row_stats_masked_keys_single_key_rows_and_nan():
    p = torch.tensor([[1.0, 0.0, 0.0],          # one visible key: left out
                      [0.5, 0.5, 0.0],          # two visible keys, uniform over them
                      [float("nan")] * 3])
    vis = torch.tensor([[True, False, False], [True, True, False], [True, True, True]])
    logits = torch.tensor([[0.0, -1e9, -1e9], [1.0, 1.0, -1e9], [0.0, 0.0, 0.0]])
    s = row_stats(p, visible=vis, logits=logits)
    assert s["rows"] == 1 and s["nan_rows"] == 1
    assert s["entropy_norm_mean"] == pytest.approx(1.0)
    assert s["jacobian_fro_mean"] == pytest.approx(0.5)      # the maximum of ‖J‖_F
    assert s["logit_std"] == pytest.approx(0.0)
    assert row_stats(torch.tensor([[1.0, 0.0]])) is None


def test_learned_temperature_judged_by_gradient_flow_not_entropy():
    """Swin V2 cosine attention: temperature 10 at init gives peaky rows on purpose; with
    ``scale="learned"`` the verdict is the dead-gradient share, so it passes, while the same
    layer without the hint fails on entropy — and a temperature that kills the softmax Jacobian
    still fails."""
    sw = load("lint/correct/swin_cosine.py")
    assert sw.DYNAMIC["hints"]["scale"] == "learned"
    hints = dict(sw.DYNAMIC["hints"])
    r = run(sw.WindowCosineAttention(), **hints)
    assert r.status == "pass", r.message
    assert r.metrics["judged_by"] == "dead_gradient_share" and r.metrics["scale"] == "learned"
    assert r.metrics["entropy_norm_mean"] < FAIL_ENTROPY       # the entropy rule would fail
    assert r.metrics["dead_gradient_share"] <= 0.05
    assert "learned temperature" in r.message
    hints.pop("scale")
    assert run(sw.WindowCosineAttention(), **hints).status == "fail"
    hot = sw.WindowCosineAttention()
    with torch.no_grad():
        hot.logit_scale.fill_(math.log(100.0))       # the clamp's maximum: temperature 100
        hot.qkv.weight.mul_(4.0)
    r = run(hot, scale="learned", causal=False)
    assert r.metrics["dead_gradient_share"] > 0.2 and r.status == "fail", r.metrics
    assert "neither the logits nor the temperature get a gradient" in r.message
