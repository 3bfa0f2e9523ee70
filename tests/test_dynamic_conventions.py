"""Correct code with uncommon conventions passes; its buggy twin fails (fixtures/dynamic/
conventions.py)."""
import pytest
import torch
from _dynamic_helpers import load

import attncheck
from attncheck.dynamic.probe import Probe, _einsum_key_axis, _einsum_query_axis
from attncheck.dynamic.spec import build
from attncheck.dynamic.targets import target

fx = load("dynamic/conventions.py")


def _run(name, checks, **extra):
    hints = dict(fx.CORRECT.get(name) or fx.BUGGY[name][0])
    hints.update(extra)
    obj = build(getattr(fx, name), name)
    return attncheck.check(obj, checks=checks, device="cpu", max_examples=2, timeout=60,
                           **hints)


@pytest.mark.parametrize("eq,key,query", [("bhid,bhjd->bhij", 3, 2), ("bihd,bjhd->bijh", 2, 1),
                                          ("bjhd,bihd->bhij", 3, 2), ("bhd,bhd->bh", None, None)])
def test_einsum_key_axis(eq, key, query):
    assert _einsum_key_axis(eq) == key
    assert _einsum_query_axis(eq) == query


def test_probe_canonical_heads_last():
    q, k, v = (torch.randn(2, 5, 3, 4) for _ in range(3))
    with Probe() as p:
        fx.einsum_heads_last(q, k, v)
    (r,) = p.records
    assert (r.query_axis, r.key_axis, r.dim) == (1, 2, 2)
    assert tuple(r.canonical(r.probs).shape) == (2, 3, 5, 5)
    assert torch.allclose(r.canonical(r.probs).sum(-1), torch.ones(2, 3, 5))


def test_heads_last_softmax_over_keys_passes_and_wrong_axis_fails():
    ok = _run("einsum_heads_last", ["normalization"]).results[0]
    assert ok.status == "pass", ok.message
    bad = _run("einsum_heads_last_wrong_axis", ["normalization"]).results[0]
    assert bad.status == "fail" and "do not sum to 1" in bad.message


def test_self_attention_only_kernel_detected_once():
    t = target(fx.causal_self_attention_kernel, causal=True)
    det = t.ensure_cross_support()
    assert det["cross"] is False and det["exception"] == "RuntimeError"
    assert t.allows_cross is False
    rep = attncheck.check(t, checks=["shapes", "normalization"], device="cpu", max_examples=4)
    assert [r.status for r in rep.results] == ["pass", "pass"]
    assert all(r.metrics["lengths"].startswith("L_q = L_k only") for r in rep.results)
    assert "self-attention only" in rep.extra["conventions"][0]
    # a kernel that takes L_q != L_k is left alone
    t2 = target(fx.causal_bottom_right_zero_rows, causal=True)
    assert t2.ensure_cross_support()["cross"] is True and t2.allows_cross


def test_self_attention_only_kernel_with_leak_still_fails():
    rep = _run("self_attention_kernel_leaks", ["causality"])
    assert rep.results[0].status == "fail"
    assert "future leak" in rep.results[0].message


def test_bottom_right_query_without_visible_key_is_not_a_normalization_failure():
    from attncheck.dynamic.checks.normalization import _judge
    from attncheck.dynamic.targets import Example

    t = target(fx.causal_bottom_right_zero_rows, causal=True, alignment="bottom_right")
    ex = Example(B=1, L_q=5, L_k=3, H=1, d=4, seed=0)
    vi = t.make_inputs(ex, causal=True, v_identity=True)
    msg, m = _judge("V=identity", t(vi).out, t.blocked(vi), 1e-4, ex)
    assert msg is None and m["empty_rows"] == 2 and m["max_masked_weight"] == 0.0
    # a row that does have visible keys must still sum to 1
    w = t(vi).out.clone()
    w[..., 4, :] *= 0.5
    msg, _ = _judge("V=identity", w, t.blocked(vi), 1e-4, ex)
    assert msg is not None and "sums to 0.5" in msg


def test_alibi_declared_reference_passes_and_wrong_sign_fails():
    ok = _run("alibi_causal", ["reference"]).results[0]
    assert ok.status == "pass", ok.message
    assert ok.metrics["max_abs_diff"] < 1e-5
    bad = _run("alibi_wrong_sign", ["reference"]).results[0]
    assert bad.status == "fail" and "ALiBi position bias (declared)" in bad.message


def test_alibi_slopes_follow_the_paper():
    from attncheck.dynamic.positions import alibi_bias, alibi_slopes

    assert alibi_slopes(8) == [2.0 ** -(i + 1) for i in range(8)]
    assert alibi_slopes(4)[0] == pytest.approx(0.25)
    assert len(alibi_slopes(6)) == 6 and alibi_slopes(6)[:4] == alibi_slopes(4)
    b = alibi_bias(1, 2, 4, "bottom_right", [0.5])
    assert b[0].tolist() == [[-1.0, -0.5, 0.0, -0.5], [-1.5, -1.0, -0.5, 0.0]]


def test_position_bias_detected_from_the_logits():
    from attncheck.dynamic.positions import detect_positions

    alibi = detect_positions(target(fx.alibi_causal, causal=True, alignment="bottom_right"))
    assert alibi["kind"] == "alibi"
    assert alibi["measured_slopes"] == pytest.approx(fx.alibi_slopes(2).tolist(), rel=1e-4)
    t5 = detect_positions(target(fx.T5StyleRelativeBias(), causal=False))
    assert t5["kind"] == "relative" and "softmax #0" in t5["message"]
    assert detect_positions(target(fx.QKNormAttention(), causal=False))["kind"] == "none"


def test_relative_bias_layer_skips_permutation_and_scale_is_measured_through_the_bias():
    rep = _run("T5StyleRelativeBias", ["permutation-equivariance", "scale"])
    pe, sc = rep.results
    assert pe.status == "skip" and "relative position bias (detected)" in pe.message
    assert sc.status == "pass" and sc.metrics["effective_scale"] == pytest.approx(1.0, rel=1e-6)
    undeclared = _run("T5StyleRelativeBias", ["scale"], scale=None).results[0]
    assert undeclared.status == "fail" and "missing" in undeclared.message
    xl = _run("RelPartialBidirectional", ["permutation-equivariance"]).results[0]
    assert xl.status == "skip" and "relative position bias (xl) (declared)" in xl.message


def test_key_bias_exempt_by_experiment_not_by_name():
    rep = _run("RelPartialLearnableAttention", ["gradient-flow"])
    r = rep.results[0]
    assert r.status == "pass", r.message
    assert "k_proj.bias" in r.metrics["no_effect"]
    assert r.metrics["no_effect"]["k_proj.bias"] < 1e-4


def test_declared_temperature_honoured_by_saturation_and_reference():
    sat = _run("QKNormAttention", ["saturation"]).results[0]
    assert sat.status == "pass" and "declared temperature (scale=10)" in sat.message
    assert sat.metrics["judged_by"] == "dead_gradient_share"
    ref = _run("qk_norm_sdpa", ["reference", "gradient-flow"])
    assert [r.status for r in ref.results] == ["pass", "pass"], [r.message for r in ref.results]
    bad = _run("QKNormSoftmaxOverQueries", ["normalization"]).results[0]
    assert bad.status == "fail"


def _learned_temperature_kernel(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) * 0.7, dim=-1) @ v


def _learned_temperature_wrong_axis(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) * 0.7, dim=-2) @ v


def test_learned_scale_reference_compares_at_the_target_temperature():
    ok = attncheck.check(_learned_temperature_kernel, checks=["reference"], device="cpu",
                         max_examples=4, scale="learned", causal=False).results[0]
    assert ok.status == "pass", ok.message
    bad = attncheck.check(_learned_temperature_wrong_axis, checks=["reference"], device="cpu",
                          max_examples=4, scale="learned", causal=False).results[0]
    assert bad.status == "fail" and "learned temperature" in bad.message


def test_error_inside_attncheck_is_reported_as_ours(monkeypatch):
    from attncheck.dynamic.checks import reference

    # attncheck's own code raising (here: float(None) inside reference._num)
    monkeypatch.setattr(reference, "judge", lambda *a, **k: (True, {"max_abs_diff": None}))
    r = attncheck.check(fx.causal_bottom_right_zero_rows, checks=["reference"], device="cpu",
                        max_examples=2, causal=False).results[0]
    assert r.status == "error" and r.metrics["internal_error"] is True
    assert r.message.startswith("internal error in attncheck") and "please report" in r.message
    assert "the target raised" not in r.message


def test_error_inside_the_target_is_still_the_targets():
    def raising(q, k, v):
        raise TypeError("user bug")

    r = attncheck.check(raising, checks=["reference"], device="cpu", max_examples=2,
                        causal=False).results[0]
    assert r.status == "error" and "the target raised TypeError: user bug" in r.message
    assert "internal_error" not in r.metrics


class RequiredMaskLayer(torch.nn.Module):
    """Self-attention layer ``forward(x, attention_mask)``: x (B, L, 16), attention_mask a bool
    keep-mask broadcastable to (B, 2, L, L), required (no default)."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)
        self.embed_dim, self.num_heads = 16, 2

    def forward(self, x, attention_mask):
        B, L, _ = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, 2, 8).permute(2, 0, 3, 1, 4)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask)
        return out.transpose(1, 2).reshape(B, L, 16)


def test_required_mask_argument_is_not_counted_as_an_input_tensor():
    t = target(RequiredMaskLayer())
    assert (t.call, t.mask_arg, t.mask_required) == ("x", "attention_mask", True)
    # checks that vary no mask pass an all-keep mask; the padding check passes real ones
    rep = attncheck.check(RequiredMaskLayer(), checks=["shapes", "padding"], device="cpu",
                          max_examples=2)
    assert [r.status for r in rep.results] == ["pass", "pass"], [r.message for r in rep.results]
    assert rep.extra["mask_convention"]["convention"] == "keep"


class RequiredKeyPaddingLayer(torch.nn.Module):
    """``forward(x, attention_mask)``: attention_mask (B, L) bool, True = real token (the
    transformers convention), handed to nn.MultiheadAttention as its key padding mask."""

    def __init__(self):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(16, 2, batch_first=True)
        self.embed_dim, self.num_heads = 16, 2

    def forward(self, x, attention_mask):
        return self.mha(x, x, x, key_padding_mask=~attention_mask)[0]


def test_required_mask_of_shape_batch_by_keys_is_detected_as_key_padding():
    rep = attncheck.check(RequiredKeyPaddingLayer(), checks=["shapes", "normalization", "padding"],
                          device="cpu", max_examples=2)
    assert [r.status for r in rep.results] == ["pass", "pass", "pass"], [
        r.message for r in rep.results]
    assert rep.extra["mask_convention"]["convention"] == "keep"


def test_kernel_with_a_required_mask_gets_an_all_keep_mask():
    def kernel(q, k, v, attn_mask):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)

    assert target(kernel).mask_required
    r = attncheck.check(kernel, checks=["reference"], device="cpu", max_examples=2).results[0]
    assert r.status == "pass", r.message


def test_call_hint_the_signature_refuses_is_the_targets_error_with_a_hint():
    r = attncheck.check(RequiredMaskLayer(), checks=["shapes"], device="cpu", max_examples=2,
                        call="q_k_v").results[0]
    assert r.status == "error" and not r.metrics.get("internal_error"), r.message
    assert "TargetCallError" in r.message and "call=x|q_kv|qkv" in r.message
    assert "internal error" not in r.message


@pytest.mark.parametrize("name,convention", [
    ("hf_style_kernel", "sdpa"), ("eager_attention_forward", "hf_eager"),
    ("varlen_attention", "varlen"), ("attention_weights", "weights")])
def test_kernel_convention_read_from_the_signature(name, convention):
    t = target(getattr(fx, name))
    assert t.kind == "kernel" and t.convention == convention
    if convention == "hf_eager":
        assert (t.mask_arg, t.mask_convention) == ("attention_mask", "additive")
        assert t.mask_detection["source"] == "adapter"
    if convention == "sdpa":
        assert t.mask_arg == "attention_mask"


def test_key_padding_mask_name_implies_key_padding_shape():
    t = target(fx.PaddingMaskLayer())
    assert (t.mask_arg, t.mask_shape, t.key_only_mask) == ("key_padding_mask", "BK", True)
    rep = _run("PaddingMaskLayer", ["padding", "normalization"])
    assert [r.status for r in rep.results] == ["pass", "pass"], [r.message for r in rep.results]
    assert rep.extra["mask_convention"]["convention"] == "blocked"


@pytest.mark.parametrize("correct,buggy,check", [
    ("eager_attention_forward", "eager_attention_mask_ignored", "causality"),
    ("varlen_attention", "varlen_attention_crosses_sequences", "batch-independence"),
    ("attention_weights", "attention_weights_unscaled", "scale")])
def test_convention_targets_pass_and_their_buggy_twins_fail(correct, buggy, check):
    ok = _run(correct, [check, "reference"])
    assert [r.status for r in ok.results] == ["pass", "pass"], [r.message for r in ok.results]
    bad = _run(buggy, [check]).results[0]
    assert bad.status == "fail", bad.message


def test_eager_outputs_are_canonical():
    t = target(fx.eager_attention_forward, causal=True)
    from attncheck.dynamic.targets import Example

    inp = t.make_inputs(Example(B=2, L_q=5, L_k=5, H=4, d=8), causal=True)
    out = t(inp)
    ref = torch.nn.functional.scaled_dot_product_attention(inp.q, inp.k, inp.v, is_causal=True)
    assert out.out.shape == (2, 4, 5, 8) and out.weights.shape == (2, 4, 5, 5)
    torch.testing.assert_close(out.out, ref, atol=1e-6, rtol=1e-5)


def test_cli_kind_kernel_hint():
    from click.testing import CliRunner

    from attncheck.cli import main

    spec = "fixtures/dynamic/conventions.py:attend"
    res = CliRunner().invoke(main, ["check", spec, "--checks", "shapes", "--max-examples", "2"])
    assert res.exit_code == 2 and "--hint kind=kernel" in res.output
    res = CliRunner().invoke(main, ["check", spec, "--hint", "kind=kernel", "--checks",
                                    "shapes,reference", "--max-examples", "2", "--no-causal"])
    assert res.exit_code == 0, res.output


@pytest.mark.slow
def test_cli_kind_kernel_hint_subprocess():
    import subprocess
    import sys

    spec = "fixtures/dynamic/conventions.py:attend"
    proc = subprocess.run([sys.executable, "-m", "attncheck", "check", spec, "--hint",
                           "kind=kernel", "--checks", "shapes", "--max-examples", "2",
                           "--format", "json"], capture_output=True, text=True, cwd=fx.__file__
                          .rsplit("/fixtures/", 1)[0])
    assert proc.returncode == 0, proc.stderr
    assert '"status": "pass"' in proc.stdout


def test_cli_internal_error_exits_2_with_a_report_request(monkeypatch):
    from click.testing import CliRunner

    from attncheck.cli import main
    from attncheck.dynamic.checks import reference

    monkeypatch.setattr(reference, "judge", lambda *a, **k: (True, {"max_abs_diff": None}))
    res = CliRunner().invoke(main, ["check", "fixtures/dynamic/conventions.py:attend", "--hint",
                                    "kind=kernel", "--checks", "reference", "--max-examples",
                                    "2", "--no-causal"])
    assert res.exit_code == 2
    assert "internal error in attncheck" in res.output and "please" in res.output
    assert "the target raised" not in res.output


def test_state_check_catches_forward_that_rewrites_its_flag():
    bad = _run("MaskFlagMutated", ["state"]).results[0]
    assert bad.status == "fail" and "is_causal: True → False" in bad.message
    assert bad.metrics["eval_output_max_abs_diff"] > 0.1
    ok = _run("CachedMaskLayer", ["state"]).results[0]
    assert ok.status == "pass" and ok.metrics["eval_output_max_abs_diff"] == 0.0


def test_magnitude_sweep_catches_weak_fills_only():
    mf = load("dynamic/mask_fills.py")
    res = {}
    for name, causal in (("good_fill", False), ("weak_fill", False), ("causal_weak", True)):
        res[name] = attncheck.check(getattr(mf, name), checks=["magnitude"], device="cpu",
                                    causal=causal, mask_convention="keep").results[0]
    assert res["good_fill"].status == "pass"
    assert {e["dtype"] for e in res["good_fill"].metrics["sweep"]} == {"float32", "float16"}
    assert max(abs(e["magnitude"]) for e in res["good_fill"].metrics["sweep"]) == 1e5
    assert res["weak_fill"].status == "fail" and "padded keys [4, 5]" in res["weak_fill"].message
    assert res["causal_weak"].status == "fail" and "±10000 in float32" in \
        res["causal_weak"].message


def test_paths_check_compares_two_code_paths():
    ok = _run("TwoPathAttention", ["paths"]).results[0]
    assert ok.status == "pass" and ok.metrics["switch"] == "argument use_sdpa"
    assert ok.metrics["max_abs_diff"] < 1e-5
    bad = _run("TwoPathManualMisscaled", ["paths", "reference"])
    paths, ref = bad.results
    assert paths.status == "fail" and "attribute fused=True vs False" in paths.message
    assert ref.status == "pass"  # the default (fused) path alone looks right
    m = fx.TwoPathManualMisscaled()
    attncheck.check(m, checks=["paths"], device="cpu", max_examples=2,
                    **fx.BUGGY["TwoPathManualMisscaled"][0])
    assert m.fused is True  # the switch is restored


def test_kv_cache_with_a_padding_mask():
    ok = _run("CachedCausalAttention", ["kv-cache"]).results[0]
    assert ok.status == "pass" and ok.metrics["padded_run"] is True, ok.message
    bad = _run("CachedAttentionDropsMaskOnDecode", ["kv-cache"]).results[0]
    assert bad.status == "fail" and bad.metrics["padding_mask"] is True
    assert "decode step at position 3" in bad.message and "key padding mask" in bad.message


def test_parameter_free_layer_is_not_judged_at_initialisation():
    r = _run("ParameterFreeAttention", ["saturation"], embed_dim=512).results[0]
    assert r.status == "skip" and "no parameters" in r.message
    assert r.metrics["saturated_share"] > 0.9  # the figures are still reported


def test_qk_norm_gradient_flow_at_head_dim_1():
    r = _run("qk_norm_sdpa", ["gradient-flow"], head_dim=1).results[0]
    assert r.status == "pass", r.message
    assert set(r.metrics["no_effect"]) >= {"input q"}


def _alibi_softmax(q, k, v, sign=-1.0):
    """Causal ALiBi written out with softmax, so the probe sees ``(B, H, L_q, L_k)`` logits;
    slopes ``2^(-8h/H)`` for every H (many implementations' choice when H is not a power of
    two, where the reference code interleaves two sequences)."""
    H, L_q, L_k = q.size(1), q.size(-2), k.size(-2)
    m = fx.alibi_slopes(H).to(q).view(1, H, 1, 1)
    i = torch.arange(L_q, device=q.device).view(-1, 1) + (L_k - L_q)
    j = torch.arange(L_k, device=q.device).view(1, -1)
    scores = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5 + sign * m * (i - j).to(q)
    return scores.masked_fill(j > i, float("-inf")).softmax(dim=-1) @ v


def test_alibi_slopes_are_measured_per_head_at_each_head_count():
    from attncheck.dynamic.positions import detect_positions

    t = target(_alibi_softmax, causal=True, alignment="bottom_right")
    for H in (2, 3):
        det = detect_positions(t, n_heads=H)
        assert det["kind"] == "alibi"
        assert det["measured_slopes"] == pytest.approx(fx.alibi_slopes(H).tolist(), rel=1e-4)


def test_undeclared_alibi_kernel_matches_the_reference_at_any_head_count():
    res = attncheck.check(target(_alibi_softmax, causal=True, alignment="bottom_right"),
                          checks=["reference"], device="cpu", max_examples=10).results[0]
    assert res.status == "pass", res.message
    assert res.metrics["max_abs_diff"] < 1e-5


def test_undeclared_alibi_with_inverted_sign_fails_the_reference():
    from functools import partial

    from attncheck.dynamic.positions import detect_positions

    det = detect_positions(target(fx.alibi_wrong_sign, causal=True, alignment="bottom_right"))
    assert det["kind"] == "alibi" and det["inverted"]
    assert det["measured_slopes"] == pytest.approx(fx.alibi_slopes(2).tolist(), rel=1e-4)
    res = attncheck.check(target(partial(_alibi_softmax, sign=1.0), causal=True,
                                 alignment="bottom_right"),
                          checks=["reference"], device="cpu", max_examples=10).results[0]
    assert res.status == "fail" and "sign inverted" in res.message
    assert res.metrics["max_abs_diff"] > 1e-4
