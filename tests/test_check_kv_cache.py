"""``kv-cache``: incremental decoding reproduces the full forward."""
import torch
import torch.nn.functional as F
from _dynamic_helpers import load
from _check_helpers import run, run_case
from torch.nn.attention.bias import causal_lower_right

CACHE = {"arg": "past_kv", "flag": "use_cache"}


def make_fixed():
    """B10's layer with the fix: is_causal only when there is no cache (L_q == L_k)."""
    base = load("cases/b10_is_causal_kv_cache_decode.py").CachedSelfAttention

    class Fixed(base):
        def forward(self, x, past_kv=None, use_cache=False):
            B, L, D = x.shape
            q, k, v = (t.view(B, L, self.num_heads, -1).transpose(1, 2)
                       for t in self.qkv(x).chunk(3, dim=-1))
            if past_kv is not None:
                k = torch.cat([past_kv[0], k], dim=2)
                v = torch.cat([past_kv[1], v], dim=2)
            mask = causal_lower_right(L, k.size(2))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            y = self.proj(y.transpose(1, 2).reshape(B, L, D))
            return (y, (k, v)) if use_cache else y
    return Fixed()


def test_is_causal_on_decode_b10_fails_at_first_decode_step():
    r = run_case("b10_is_causal_kv_cache_decode", "kv-cache")
    assert r.status == "fail" and "bottom-right" in r.message
    steps = {(s[0], s[1]): s[2] for s in r.metrics["steps"]}
    assert steps[(0, 3)] < 1e-5          # the prefill has L_q == L_k: correct
    assert steps[(3, 4)] > 1e-2          # the first 1-token step sees only key 0


def test_fixed_layer_passes():
    r = run(make_fixed(), "kv-cache", causal=True, cache=CACHE)
    assert r.status == "pass", r.message
    assert r.metrics["max_abs_diff"] < 1e-5 and len(r.metrics["steps"]) == 6


def test_kernel_convention_top_left_fails_bottom_right_passes():
    top_left = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    r = run(top_left, "kv-cache", kind="kernel", causal=True, kv_cache=True)
    assert r.status == "fail"

    def bottom_right(q, k, v):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=causal_lower_right(q.size(-2), k.size(-2)))
    r = run(bottom_right, "kv-cache", kind="kernel", causal=True, kv_cache=True)
    assert r.status == "pass", r.message


def test_cache_hint_naming_arguments_forward_lacks_is_an_error_naming_them():
    layer = make_fixed()
    r = run(layer, "kv-cache", causal=True, cache={"arg": "past_key_value", "flag": "use_cache"})
    assert r.status == "error" and "internal error" not in r.message
    assert "takes no past_key_value" in r.message and "forward(x, past_kv, use_cache)" in r.message
    assert run(layer, "kv-cache", causal=True, kv_cache=True).status == "pass"


def test_no_cache_hint_skips():
    r = run(torch.nn.MultiheadAttention(16, 2, batch_first=True), "kv-cache")
    assert r.status == "skip" and "cache" in r.message
