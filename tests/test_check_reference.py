"""``reference``: kernels and captured attention vs a float64 SDPA reference."""
import math

import pytest
import torch
import torch.nn.functional as F
from _dynamic_helpers import load
from _check_helpers import run, run_case

from attncheck.dynamic.checks.reference import K_OUT, judge, window_blocked
from attncheck.dynamic.spec import build


def sdpa(q, k, v, attn_mask=None, is_causal=False):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)


def fp16_sloppy(q, k, v):
    """Rounds the attention weights to 3 significant bits: far worse than PyTorch's own fp16."""
    p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    m, e = torch.frexp(p.float())
    return (torch.ldexp(torch.round(m * 8) / 8, e)).to(q.dtype) @ v


def split_half_rope(q, k, v, position_offset=0):
    """Correct RoPE (GPT-NeoX split-half layout) then causal SDPA."""
    def rot(x):
        d = x.shape[-1]
        pos = torch.arange(x.size(-2), dtype=torch.float64) + position_offset
        inv = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        ang = torch.cat([pos[:, None] * inv] * 2, dim=-1).to(x.dtype)
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * ang.cos() + torch.cat((-x2, x1), dim=-1) * ang.sin()
    return F.scaled_dot_product_attention(rot(q), rot(k), v, is_causal=True)


def test_judge_low_precision_bound():
    ref = torch.zeros(4, dtype=torch.float64)
    out = torch.full((4,), 0.01, dtype=torch.float16)
    ok, m = judge(out, ref, torch.float16, 5e-3, 5e-3, baseline=0.001)
    assert not ok and m["bound"] == pytest.approx(K_OUT * 0.001)
    assert m["error_ratio"] == pytest.approx(float(out[0]) / (K_OUT * 0.001), rel=1e-3)
    ok, m = judge(out, ref, torch.float16, 5e-3, 5e-3, baseline=0.01)
    assert ok and m["error_ratio"] < 1


def test_window_blocked_counts_keys():
    vis = ~window_blocked(10, 10, 4) & torch.ones(10, 10, dtype=torch.bool).tril()
    assert vis.sum(dim=-1).tolist() == [1, 2, 3, 4, 4, 4, 4, 4, 4, 4]


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_kernel_matches(causal):
    r = run(sdpa, "reference", causal=causal)
    assert r.status == "pass", r.message
    assert r.metrics["max_abs_diff"] < 1e-5


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sdpa_kernel_low_precision_judged_against_torch(dtype):
    r = run(sdpa, "reference", dtype=dtype, causal=False)
    assert r.status == "pass", r.message
    assert 0 < r.metrics["error_ratio"] <= 1.0 and r.metrics["k"] == K_OUT


def test_sloppy_fp16_kernel_fails_by_ratio():
    r = run(fp16_sloppy, "reference", dtype="float16", causal=False)
    assert r.status == "fail", r.message
    assert r.metrics["error_ratio"] == "inf" or r.metrics["error_ratio"] > 1.0


def test_gqa_tile_b31_fails():
    r = run_case("b31_gqa_tile_vs_interleave", "reference")
    assert r.status == "fail" and "repeat_interleave" in r.message
    assert r.metrics["gqa"] is True and r.metrics["max_abs_diff"] > 0.01


def test_missing_scale_b05_fails():
    r = run_case("b05_missing_scale_default_one", "reference")
    assert r.status == "fail" and r.metrics["max_abs_diff"] > 1e-3


def test_scale_hint_accepts_intentional_scale():
    unscaled = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=1.0)
    assert run(unscaled, "reference", kind="kernel", scale=1.0).status == "pass"


def test_layer_softmax_scale_b01_fails():
    r = run_case("b01_scale_uses_embed_dim", "reference")
    assert r.status == "fail"
    (entry,) = [c for c in r.metrics["compared"] if c["record"].startswith("softmax")]
    assert entry["effective_scale"] == pytest.approx(32 ** -0.5, rel=1e-3)
    assert entry["expected_scale"] == pytest.approx(8 ** -0.5)


def test_layer_double_scale_b03_fails():
    r = run_case("b03_double_scale_sdpa", "reference")
    assert r.status == "fail"
    entry = next(c for c in r.metrics["compared"] if "expected" in c["what"])
    assert entry["effective_scale"] == pytest.approx(1 / 16, rel=1e-3)
    assert entry["expected_scale"] == pytest.approx(0.25)


def test_mha_layout_reference_b25_fails():
    r = run_case("b25_batch_first_merge_view", "reference")
    assert r.status == "fail" and "MultiheadAttention" in r.message


def test_correct_layers_pass():
    mod = load("lint/correct/textbook_mha.py")
    r = run(build(mod.MultiHeadAttention, "x"), "reference", **mod.DYNAMIC["hints"])
    assert r.status == "pass", r.message and r.metrics["n_compared"] >= 1
    ng = load("dynamic/nanogpt_layer.py")
    assert run(ng.make_causal_layer(), "reference", causal=True).status == "pass"


def test_rope_relative_invariance():
    r = run(split_half_rope, "reference", kind="kernel", causal=True,
            rope={"offset_arg": "position_offset"})
    assert r.status == "pass", r.message
    bad = run_case("b32_rope_convention_mismatch", "reference")
    assert bad.status == "fail" and bad.metrics["fail_max_abs_diff"] > 1e-3


def test_learned_scale_hint_keeps_the_targets_temperature():
    mod = load("lint/correct/swin_cosine.py")
    obj = build(getattr(mod, mod.DYNAMIC["target"]), "swin")
    hints = dict(mod.DYNAMIC["hints"])
    assert hints.pop("scale") == "learned"  # the fixture declares its learned temperature
    bad = run(obj, "reference", **hints)
    assert bad.status == "fail"            # logit scale 10 is not 1/√8 without the hint
    (entry,) = bad.metrics["compared"]
    assert entry["effective_scale"] == pytest.approx(10.0, rel=1e-3)
    ok = run(obj, "reference", scale="learned", **hints)
    assert ok.status == "pass", ok.message
    assert ok.metrics["compared"][0]["max_abs_diff"] < 1e-6


class _GQALayer(torch.nn.Module):
    """GQA self-attention (4 query heads, 2 key/value heads) whose key/value heads are expanded
    by ``expand`` and attended with a hand-written softmax or SDPA."""

    def __init__(self, expand: str, sdpa: bool, d_model: int = 16, num_heads: int = 4,
                 num_kv_heads: int = 2):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, d_model // num_heads
        self.embed_dim, self.expand, self.sdpa = d_model, expand, sdpa
        self.q_proj = torch.nn.Linear(d_model, d_model)
        self.kv_proj = torch.nn.Linear(d_model, 2 * num_kv_heads * self.head_dim)
        self.o_proj = torch.nn.Linear(d_model, d_model)

    def forward(self, x):
        B, L, _ = x.shape
        n_rep = self.num_heads // self.num_kv_heads
        q = self.q_proj(x).view(B, L, self.num_heads, self.head_dim).transpose(1, 2)
        k, v = (t.view(B, L, self.num_kv_heads, self.head_dim).transpose(1, 2)
                for t in self.kv_proj(x).chunk(2, dim=-1))
        if self.expand == "repeat_interleave":
            k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
        elif self.expand == "expand_reshape":  # transformers' repeat_kv
            k, v = (t[:, :, None].expand(B, self.num_kv_heads, n_rep, L, self.head_dim)
                    .reshape(B, self.num_heads, L, self.head_dim) for t in (k, v))
        elif self.expand == "repeat":
            k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
        else:
            k, v = torch.cat([k] * n_rep, dim=1), torch.cat([v] * n_rep, dim=1)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v)
        else:
            y = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.head_dim), dim=-1) @ v
        return self.o_proj(y.transpose(1, 2).reshape(B, L, -1))


@pytest.mark.parametrize("sdpa", [False, True])
@pytest.mark.parametrize("expand", ["repeat_interleave", "expand_reshape", "repeat", "cat"])
def test_gqa_layer_key_head_mapping_read_from_the_captured_keys(expand, sdpa):
    """A GQA layer whose key/value heads are tiled (``repeat``, ``cat``) pairs query head h
    with key head h mod H_kv: it computes valid attention for its own random weights, so only
    the grouping of the heads that reach q·kᵀ shows it, given ``num_kv_heads``."""
    r = run(_GQALayer(expand, sdpa), "reference", num_heads=4, num_kv_heads=2)
    if expand in ("repeat", "cat"):
        assert r.status == "fail" and "expanded with repeat/tile" in r.message, r.message
    else:
        assert r.status == "pass", r.message
        assert any(c.get("mapping", "").endswith("(repeat_interleave)") for c in r.metrics["compared"])
    # without the hint there is no convention to hold the layer to
    assert run(_GQALayer(expand, sdpa), "reference", num_heads=4).status == "pass"
