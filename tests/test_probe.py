"""The probe (attncheck.dynamic.probe) and the V = identity reader (attncheck.dynamic.opaque)."""
import math

import pytest
import torch
import torch.nn.functional as F
from _dynamic_helpers import load
from hypothesis import given
from hypothesis import strategies as st

from attncheck.dynamic.opaque import (
    OpaqueKernelError,
    attention_probs_via_identity,
    fit_scale_from_probs,
)
from attncheck.dynamic.probe import Probe, opaque_reason, sdpa_reference

K = load("dynamic/probe_kernels.py")
Ly = load("dynamic/probe_layers.py")


def _mode_stack():
    return torch.overrides._get_current_function_mode_stack()


# ------------------------------------------------------------------ softmax records
def test_records_every_softmax_flavour_in_call_order():
    x = torch.randn(2, 3, 5)
    with Probe() as p:
        a = F.softmax(x, dim=-1)
        b = torch.softmax(x, 1)
        c = x.softmax(0)
        d = torch.nn.Softmax(dim=2)(x)
        e = torch.special.softmax(x, -2)
        f = torch._softmax(x, -1, False)
        torch.log_softmax(x, -1)        # not a softmax: must not be recorded
        F.log_softmax(x, dim=-1)
    ops = [r.op for r in p.records]
    assert ops == ["torch.nn.functional.softmax", "torch.softmax", "torch.Tensor.softmax",
                   "torch.nn.functional.softmax", "torch.special.softmax", "torch._softmax"]
    assert [r.dim for r in p.records] == [2, 1, 0, 2, 1, 2]
    assert [r.index for r in p.records] == list(range(6))
    for r, out in zip(p.records, (a, b, c, d, e, f)):
        assert r.kind == "softmax" and r.shape == (2, 3, 5) and r.dtype == torch.float32
        torch.testing.assert_close(r.logits, x, rtol=0, atol=0)
        torch.testing.assert_close(r.probs, out, rtol=0, atol=0)
    # rows(): softmax axis last
    assert p.records[2].rows().shape == (3, 5, 2)
    torch.testing.assert_close(p.records[2].rows().sum(-1), torch.ones(3, 5))


def test_logits_are_clones_not_views():
    x = torch.randn(2, 4)
    with Probe() as p:
        torch.softmax(x, -1)
    x.add_(100.0)
    assert float(p.records[0].logits.abs().max()) < 50


def test_keep_tensors_false_and_max_records():
    x = torch.randn(3, 4)
    with Probe(keep_tensors=False, max_records=2) as p:
        for _ in range(5):
            x.softmax(-1)
        F.scaled_dot_product_attention(torch.randn(1, 1, 2, 4), torch.randn(1, 1, 3, 4),
                                       torch.randn(1, 1, 3, 4))
    assert len(p.records) == 2 and p.dropped == 4
    assert all(r.logits is None and r.probs is None for r in p.records)
    assert p.observed


# ------------------------------------------------------------------ mode stack hygiene
def test_mode_stack_clean_after_exception_in_forward():
    before = len(_mode_stack())
    with pytest.raises(RuntimeError), Probe() as p:
        torch.softmax(torch.randn(2, 3), -1)
        torch.randn(2, 3) @ torch.randn(4, 5)   # shape error raised inside the mode
    assert len(_mode_stack()) == before
    assert len(p.records) == 1
    with pytest.raises(ValueError), Probe():
        raise ValueError("user code")
    assert len(_mode_stack()) == before
    torch.softmax(torch.randn(2, 3), -1)            # not recorded any more
    assert len(p.records) == 1


def test_nested_probes_both_record():
    x = torch.randn(2, 3)
    with Probe() as outer:
        with Probe() as inner:
            x.softmax(-1)
        x.softmax(0)
    assert [r.dim for r in inner.records] == [1]
    assert [r.dim for r in outer.records] == [1, 0]


def test_legacy_implicit_softmax_dim_is_normalised():
    x = torch.randn(4, 3)
    with pytest.warns(UserWarning), Probe() as p:
        y = F.softmax(x)                     # implicit dim: 1 for a 2-D input (PyTorch legacy)
    assert p.errors == [] and p.records[0].dim == 1 and torch.equal(y, F.softmax(x, 1))


# ------------------------------------------------------------------ SDPA
@st.composite
def sdpa_cases(draw):
    B = draw(st.integers(1, 2))
    Hk = draw(st.integers(1, 3))
    gqa = draw(st.booleans())
    Hq = Hk * (draw(st.integers(1, 3)) if gqa else 1)
    L = draw(st.integers(1, 7))
    S = draw(st.integers(1, 7))
    E = draw(st.sampled_from([1, 2, 4, 8, 16]))
    Ev = draw(st.sampled_from([E, 3]))
    mask = draw(st.sampled_from(["none", "bool", "float", "causal"]))
    scale = draw(st.one_of(st.none(), st.floats(0.05, 2.0)))
    seed = draw(st.integers(0, 2**31 - 1))
    return B, Hq, Hk, L, S, E, Ev, mask, scale, gqa, seed


@given(sdpa_cases())
def test_sdpa_recomputation_matches_real_sdpa(case):
    B, Hq, Hk, L, S, E, Ev, mask, scale, gqa, seed = case
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Hq, L, E, generator=g)
    k = torch.randn(B, Hk, S, E, generator=g)
    v = torch.randn(B, Hk, S, Ev, generator=g)
    kw = {"scale": scale, "enable_gqa": gqa}
    if mask == "bool":
        kw["attn_mask"] = torch.rand(B, 1, L, S, generator=g) > 0.3   # some rows fully masked
    elif mask == "float":
        kw["attn_mask"] = torch.randn(L, S, generator=g)
    elif mask == "causal":
        kw["is_causal"] = True
    with Probe() as p:
        out = F.scaled_dot_product_attention(q, k, v, **kw)
    (r,) = p.records
    assert r.kind == "sdpa" and r.shape == (B, Hq, L, S) and r.dim == 3
    assert r.is_causal == (mask == "causal") and r.enable_gqa == gqa and r.scale == scale
    assert r.probs.dtype == torch.float64
    expect_scale = 1 / math.sqrt(E) if scale is None else scale
    assert r.effective_scale == pytest.approx(expect_scale, rel=1e-12)
    assert r.head_dim == E and r.num_heads == Hq
    vv = v.double().repeat_interleave(Hq // Hk, dim=1)
    torch.testing.assert_close((r.probs @ vv).float(), out, atol=1e-6, rtol=0)
    torch.testing.assert_close(r.output, out, atol=0, rtol=0)
    # rows are distributions or exactly 0 (fully masked, SDPA's convention)
    sums = r.probs.sum(-1)
    assert bool(((sums - 1).abs() < 1e-12).logical_or(sums == 0).all())


def test_sdpa_reference_causal_is_top_left():
    q, k = torch.randn(1, 1, 2, 4), torch.randn(1, 1, 4, 4)
    _, probs, _ = sdpa_reference(q, k, is_causal=True)
    assert probs[0, 0, 0].tolist()[1:] == [0.0, 0.0, 0.0]        # query 0 sees key 0 only
    assert (probs[0, 0, 1, 2:] == 0).all() and (probs[0, 0, 1, :2] > 0).all()


def test_sdpa_prescaled_q_counts_in_effective_scale():
    q, k, v = torch.randn(1, 2, 3, 16), torch.randn(1, 2, 3, 16), torch.randn(1, 2, 3, 16)
    with Probe() as p:
        qs = q * 16 ** -0.5
        F.scaled_dot_product_attention(qs, k, v)      # scaled twice: 1/16
    assert p.records[0].effective_scale == pytest.approx(1 / 16)


# ------------------------------------------------------------------ matmul-tracked scale
@pytest.mark.parametrize("style,expected", [
    ("div", 1 / math.sqrt(8)), ("preq", 1 / math.sqrt(8)), ("einsum", 1 / math.sqrt(8)),
    ("baddbmm", 1 / math.sqrt(8))])
def test_effective_scale_of_handwritten_softmax(style, expected):
    q, k, v = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    with Probe() as p:
        K.scaled_kernel("correct", style)(q, k, v)
    soft = [r for r in p.records if r.kind == "softmax"]
    assert len(soft) == 1
    assert soft[0].scale_source == "matmul" and soft[0].head_dim == 8
    assert soft[0].effective_scale == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("eq", ["... i d, ... j d -> ... i j", "...id,...jd->...ij", "bhid,...jd->bhij"])
def test_einsum_with_an_ellipsis_is_a_qk_product(eq):
    # IDEFICS' perceiver resampler: torch.einsum("... i d, ... j d -> ... i j", q * scale, k)
    q, k = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 6, 8)
    with Probe() as p:
        torch.einsum(eq, q * 8 ** -0.5, k).softmax(-1)
    (r,) = p.attention_records()
    assert r.scale_source == "matmul" and r.head_dim == 8
    assert r.effective_scale == pytest.approx(1 / math.sqrt(8), rel=1e-5)


def test_effective_scale_with_inplace_and_masked_scores():
    q, k = torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 4)
    with Probe() as p:
        q = q.clone()
        q *= 0.5
        q.div_(2.0)                                    # q scaled by 1/4
        s = torch.matmul(q, k.transpose(-1, -2)) * 3   # then ×3 → 0.75
        s = s.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), torch.finfo(s.dtype).min)
        s.softmax(-1)
    (r,) = p.records
    assert r.effective_scale == pytest.approx(0.75, rel=1e-5)
    assert r.scale_fit == 1.0


def test_inplace_scaling_of_the_scores_is_counted():
    q, k = torch.randn(1, 2, 6, 16), torch.randn(1, 2, 6, 16)
    with Probe() as p:
        s = q @ k.transpose(-2, -1)
        s /= 4.0                                       # in place, on the matmul's output
        s.masked_fill_(torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf"))
        s.softmax(-1)
    assert p.records[0].effective_scale == pytest.approx(0.25, rel=1e-6)


def _keys_first(q, k, v, d, weights):
    s = k @ q.transpose(-2, -1) / math.sqrt(q.size(-1))   # (B, H, L_k, L_q)
    p = F.dropout(s.softmax(dim=d), p=0.1, training=False)
    return weights(p) @ v


@pytest.mark.parametrize("weights", [lambda p: p.transpose(-2, -1), lambda p: p.mT,
                                     lambda p: p.permute(0, 1, 3, 2)])
@pytest.mark.parametrize("d", [-2, -1])
def test_key_axis_is_the_axis_weights_at_v_sum_over(weights, d):
    """Scores laid out keys-first (``k @ qᵀ``) and used as ``pᵀ @ v``: the keys are axis 2, so a
    softmax over dim=-2 has rows summing to 1 over the keys and dim=-1 does not."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 4)
    with Probe() as pr:
        _keys_first(q, k, v, d, weights)
    (r,) = pr.records
    assert (r.query_axis, r.key_axis) == (3, 2)
    rows = r.canonical(r.probs)
    assert rows.shape == (2, 3, 5, 7)
    err = float((rows.sum(-1) - 1).abs().max())
    assert (err < 1e-5) == (d == -2)


def test_scale_fit_on_large_maps_uses_a_subset():
    q, k = torch.randn(2, 4, 160, 8), torch.randn(2, 4, 160, 8)    # 204800 entries
    with Probe() as p:
        (q @ k.mT * 0.3).softmax(-1)
    assert p.records[0].effective_scale == pytest.approx(0.3, rel=1e-5)


def test_projection_matmul_is_not_taken_for_qk():
    lin = torch.nn.Parameter(torch.randn(8, 5))
    x = torch.randn(3, 8)
    with Probe() as p:
        torch.softmax(x @ lin, -1)      # a classifier head, not attention
    assert p.records[0].effective_scale is None
    assert p.attention_records() == []


def test_softmax_over_biased_qk_is_attention_without_a_scale():
    q, k = torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4)
    bias = torch.randn(2, 5, 5)                         # T5-style relative position bias
    with Probe() as p:
        (q @ k.mT + bias).softmax(-1)
    (r,) = p.attention_records()
    assert r.effective_scale is None and r.extra["qk_matmul"] == "matmul"
    with Probe(track_matmuls=False) as p:
        (q @ k.mT).softmax(-1)
    assert p.attention_records() == [] and len(p.records) == 1


# ------------------------------------------------------------------ MHA made observable
def test_multihead_attention_is_observable_and_unchanged():
    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        ref_out, ref_w = m(x, x, x, key_padding_mask=kpm, need_weights=True,
                           average_attn_weights=False)
        with Probe() as p:
            out, w = m(x, x, x, key_padding_mask=kpm, need_weights=False)
    assert w is None                                    # the caller's request is honoured
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=0)
    (r,) = p.records
    assert r.kind == "mha" and r.shape == (2, 4, 5, 5) and r.num_heads == 4
    assert r.head_dim == 4 and r.effective_scale == pytest.approx(0.5)
    torch.testing.assert_close(r.probs, ref_w, atol=1e-6, rtol=0)
    assert (r.probs[1, :, :, 3:] == 0).all()           # padded keys get weight 0
    assert p.not_observable == []


def test_multihead_attention_logits_on_request_and_opt_out():
    m = torch.nn.MultiheadAttention(8, 2).eval()       # sequence-first
    x = torch.randn(3, 1, 8)
    with torch.no_grad(), Probe(observe_mha=False) as p:
        m(x, x, x)
    assert p.records == [] and p.not_observable == [
        "torch.nn.functional.multi_head_attention_forward"]


def test_transformer_encoder_layer_is_observable():
    enc = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True).eval()
    with torch.no_grad(), Probe() as p:
        enc(torch.randn(2, 6, 16), src_mask=torch.ones(6, 6, dtype=torch.bool).triu(1))
    (r,) = p.records
    assert r.kind == "mha" and r.shape == (2, 2, 6, 6)
    assert (r.probs[..., torch.ones(6, 6, dtype=torch.bool).triu(1)] == 0).all()


# ------------------------------------------------------------------ not observable
def test_attention_named_torch_function_is_not_observable():
    from torch.overrides import handle_torch_function, has_torch_function

    def flash_attn_func(q, k, v):
        if has_torch_function((q, k, v)):
            return handle_torch_function(flash_attn_func, (q, k, v), q, k, v)
        return q

    q = torch.randn(1, 1, 2, 4)
    with Probe() as p:
        flash_attn_func(q, q, q)
    assert p.records == []
    assert any("flash_attn_func" in s for s in p.not_observable)
    assert not p.observed


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_scripted_module_is_reported_opaque():
    m = Ly.ScriptedAttention()
    with Probe() as p:
        m(torch.randn(1, 4, 32))
    assert p.records == []                              # nothing inside TorchScript is seen
    reason = p.note_opaque(m)
    assert reason.startswith("TorchScript") and reason in p.not_observable
    assert opaque_reason(Ly.ProbeMHA(32, 4)) is None


def test_manual_softmax_layer_is_recorded_with_its_scale():
    with Probe() as p:
        Ly.ManualSoftmaxLayer()(torch.randn(1, 4, 32))
    (r,) = p.attention_records()
    assert r.kind == "softmax" and r.op == "softmax written by hand (exp / sum)" and r.dim == 3
    assert r.effective_scale == pytest.approx(1 / math.sqrt(8), rel=1e-4) and r.head_dim == 8
    torch.testing.assert_close(r.probs, torch.softmax(r.logits, dim=-1))


def test_softmax_form_the_probe_does_not_follow_records_nothing():
    with Probe() as p:
        Ly.ReciprocalSoftmaxLayer()(torch.randn(1, 4, 32))
    assert p.records == [] and not p.observed


def test_hand_written_softmax_with_in_place_exp_of_the_logits_is_not_recorded():
    """``s.exp_()`` overwrites the logits: there is nothing left to record them from."""
    q = torch.randn(1, 2, 4, 8)
    with Probe() as p:
        s = q @ q.transpose(-2, -1)
        s.exp_()
        s / s.sum(-1, keepdim=True)
    assert p.records == []


@given(scale=st.floats(0.05, 4.0), dim=st.sampled_from([-1, 3, 2]),
       shift=st.sampled_from(["amax", "max", "none"]), masked=st.booleans())
def test_hand_written_softmax_recorded_as_softmax_of_the_unshifted_logits(scale, dim, shift, masked):
    """``exp(s - rowmax) / sum`` over any axis, with or without the row shift and a -inf
    mask: one record whose logits are ``s`` itself, probabilities equal to ``softmax(s, dim)``
    and effective scale the factor on q·kᵀ."""
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 2, 5, 4, generator=g), torch.randn(2, 2, 5, 4, generator=g)
    with Probe() as p:
        s = (q @ k.transpose(-2, -1)) * scale
        if masked:
            s = s.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
        if shift == "amax":
            s_shifted = s - s.amax(dim=dim, keepdim=True)
        elif shift == "max":
            s_shifted = s - s.max(dim, keepdim=True)[0]
        else:
            s_shifted = s
        e = torch.exp(s_shifted)
        w = e / e.sum(dim=dim, keepdim=True)
    (r,) = p.attention_records()
    assert r.dim == dim % 4 and torch.equal(r.logits, s)
    torch.testing.assert_close(r.probs, torch.softmax(s, dim=dim))
    assert r.effective_scale == pytest.approx(scale, rel=1e-3)
    assert torch.equal(w, r.probs)


# ------------------------------------------------------------------ V = identity
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 6), st.integers(1, 6),
       st.sampled_from([2, 4, 8]), st.booleans(), st.integers(0, 2**31 - 1))
def test_identity_v_returns_the_attention_matrix(B, H, L, S, d, causal, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(B, H, L, d, generator=g), torch.randn(B, H, S, d, generator=g)
    P = attention_probs_via_identity(F.scaled_dot_product_attention, q, k, is_causal=causal,
                                     verify=True)
    _, ref, _ = sdpa_reference(q, k, is_causal=causal)
    assert P.shape == (B, H, L, S)
    torch.testing.assert_close(P.double(), ref, atol=1e-6, rtol=0)


def test_identity_v_reads_opaque_manual_softmax_kernel_and_fits_scale():
    q, k = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 7, 8)
    P = attention_probs_via_identity(K.reciprocal_softmax, q, k)
    _, ref, _ = sdpa_reference(q, k)
    torch.testing.assert_close(P.double(), ref, atol=1e-6, rtol=0)
    s, r2 = fit_scale_from_probs(P, q, k)
    assert s == pytest.approx(1 / math.sqrt(8), rel=1e-4) and r2 > 0.9999


def test_identity_v_errors_are_explicit():
    def needs_same_dim(q, k, v):
        if v.shape[-1] != q.shape[-1]:
            raise ValueError("head dims must match")
        return F.scaled_dot_product_attention(q, k, v)

    def not_linear_in_v(q, k, v):
        return F.scaled_dot_product_attention(q, k, v) ** 2

    q = torch.randn(1, 1, 3, 4)
    with pytest.raises(OpaqueKernelError, match="head dims must match"):
        attention_probs_via_identity(needs_same_dim, q, q)
    with pytest.raises(OpaqueKernelError, match="not linear in V"):
        attention_probs_via_identity(not_linear_in_v, q, q, verify=True)
