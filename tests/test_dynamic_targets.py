"""Targets: detection, hints, canonical layouts and mask conventions."""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import attncheck
from attncheck.dynamic.targets import Example, TargetError, TargetOutputError, causal_blocked

from _dynamic_helpers import load

sdpa_k = load("dynamic/sdpa_kernels.py")
nano = load("dynamic/nanogpt_layer.py")
buggy = load("dynamic/buggy_modules.py")
textbook = load("lint/correct/textbook_mha.py")


def test_kernel_detection_and_params():
    t = attncheck.target(sdpa_k.sdpa)
    assert (t.kind, t.mask_arg, t.causal_arg, t.causal) == (
        "kernel", "attn_mask", "is_causal", None)
    t = attncheck.target(sdpa_k.sdpa_causal, causal=True)
    assert (t.mask_arg, t.causal_arg, t.causal) == (None, None, True)
    t = attncheck.target(F.scaled_dot_product_attention)
    assert t.kind == "kernel" and t.accepts_mask and t.allows_cross


def test_layer_detection():
    t = attncheck.target(nano.make_causal_layer())
    assert (t.kind, t.call, t.embed_dim, t.num_heads, t.fixed_head_dim) == ("layer", "x", 32, 4, 8)
    assert t.self_attention and not t.allows_cross
    t = attncheck.target(textbook.MultiHeadAttention(d_model=32, num_heads=4))
    assert (t.call, t.mask_arg, t.embed_dim, t.num_heads, t.fixed_head_dim) == (
        "q_k_v", "mask", 32, 4, 8)


def test_builtin_adapters():
    m = torch.nn.MultiheadAttention(16, 4, batch_first=False)
    t = attncheck.target(m)
    assert (t.kind, t.embed_dim, t.num_heads, t.batch_first, t.mask_convention) == (
        "mha", 16, 4, False, "blocked")
    e = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    t = attncheck.target(e)
    assert (t.kind, t.num_heads, t.batch_first, t.self_attention) == (
        "encoder_layer", 2, True, True)


def test_fixture_hint_vocabulary():
    t = attncheck.target(textbook.MultiHeadAttention(d_model=32, num_heads=4), call="qkv",
                         returns="output_weights",
                         mask={"arg": "mask", "convention": "keep", "shape": "(B, L_q, L_k)"})
    assert (t.call, t.mask_arg, t.mask_convention, t.mask_shape) == ("q_k_v", "mask", "keep", "BQK")
    t = attncheck.target(sdpa_k.sdpa, layout="(B,L,H,d)", mask={"convention": "sdpa",
                                                                "shape": "(B, 1, 1, L_k)"})
    assert (t.layout, t.mask_convention, t.mask_shape, t.key_only_mask) == (
        "BLHd", "keep", "B11K", True)
    assert t.hints["mask"]["shape"] == "(B, 1, 1, L_k)"


@pytest.mark.parametrize("bad", [dict(layout="BXLd"), dict(call="qq"), dict(mask_convention="up"),
                                 dict(kind="nonsense")])
def test_bad_hints_raise(bad):
    with pytest.raises(TargetError):
        attncheck.target(sdpa_k.sdpa, **bad)


@pytest.mark.parametrize("obj", [42, "x", lambda a, b: a, torch.nn.Linear])
def test_unusable_objects_raise(obj):
    with pytest.raises(TargetError):
        attncheck.target(obj)


def test_blhd_layout_roundtrip_matches_bhld():
    def blhd_kernel(q, k, v):  # (B, L, H, d)
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                              v.transpose(1, 2)).transpose(1, 2)

    a = attncheck.target(blhd_kernel, layout="BLHd")
    b = attncheck.target(sdpa_k.sdpa)
    ex = Example(B=2, L_q=3, L_k=5, H=2, d=4, seed=3)
    ia, ib = a.make_inputs(ex), b.make_inputs(ex)
    torch.testing.assert_close(a(ia).out, b(ib).out)
    assert a(ia).out.shape == a.expected_out_shape(ia) == (2, 2, 3, 4)


@given(L_q=st.integers(1, 6), L_k=st.integers(1, 6),
       conv=st.sampled_from(["keep", "blocked", "additive"]))
def test_mask_conventions_equal_sdpa_reference(L_q, L_k, conv):
    """Whatever the target's convention, a canonical keep-mask means the same thing."""
    def kernel(q, k, v, attn_mask=None):
        if conv == "keep":
            m = attn_mask
        elif conv == "blocked":
            m = ~attn_mask
        else:
            m = attn_mask
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    t = attncheck.target(kernel, mask_convention=conv)
    ref = attncheck.target(sdpa_k.manual_attention)
    ex = Example(B=2, L_q=L_q, L_k=L_k, H=1, d=4, seed=L_q * 7 + L_k)
    keep = t.random_keep(ex)
    assert keep[..., 0].all()
    out = t(t.make_inputs(ex, keep=keep)).out
    o_ref, w_ref = ref(ref.make_inputs(ex, keep=keep)).raw
    torch.testing.assert_close(out, o_ref, atol=1e-5, rtol=1e-4)
    assert (w_ref.masked_select(~keep.expand_as(w_ref)) == 0).all()


def test_causal_blocked_alignment():
    tl = causal_blocked(2, 4, "top_left")
    br = causal_blocked(2, 4, "bottom_right")
    assert tl.tolist() == [[False, True, True, True], [False, False, True, True]]
    assert br.tolist() == [[False, False, False, True], [False, False, False, False]]


def test_v_identity_returns_attention_matrix():
    t = attncheck.target(sdpa_k.manual_attention)
    ex = Example(B=1, L_q=3, L_k=4, H=2, d=4, seed=1)
    out, w = t(t.make_inputs(ex)).raw
    eye = t(t.make_inputs(ex, v_identity=True)).out
    torch.testing.assert_close(eye, w)


def test_wrong_return_type_raises_target_output_error():
    t = attncheck.target(buggy.WrongTypeAttention())
    with pytest.raises(TargetOutputError):
        t(t.make_inputs(t.default_example()))
