"""``finite`` names the cause of non-finite outputs; ``saturation`` is judged on rows that exist."""
import math

import torch
import torch.nn as nn
from _check_helpers import run


class PolarityInvertedMHA(nn.Module):
    """A causal layer whose keep-mask (True = attend, SDPA's convention) goes to
    nn.MultiheadAttention, where True means blocked: the last query row has every key blocked."""

    def __init__(self, d_model=32, num_heads=4):
        super().__init__()
        self.mha = nn.MultiheadAttention(d_model, num_heads, batch_first=True)

    def forward(self, x):
        n = x.size(1)
        keep = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        return self.mha(x, x, x, attn_mask=keep, need_weights=False)[0]


def naive_softmax_attention(q, k, v):
    """exp / sum without subtracting the row maximum: overflows in fp32 for logits past ~88.7."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    e = s.exp()
    return (e / e.sum(-1, keepdim=True)) @ v


def test_nan_at_ordinary_scale_is_not_blamed_on_overflow():
    r = run(PolarityInvertedMHA(), "finite", causal=True)
    assert r.status == "fail"
    assert "not an overflow" in r.message and "every key masked" in r.message
    assert "subtract the row max" not in r.message
    assert r.metrics["input_scale"] == 1.0


def test_overflow_of_a_naive_softmax_is_blamed_on_large_logits():
    r = run(naive_softmax_attention, "finite")
    assert r.status == "fail"
    assert "large logits overflow" in r.message
    assert r.metrics["input_scale"] == 30.0


def test_saturation_leaves_nan_rows_out_and_judges_rows_where_their_mass_is():
    torch.manual_seed(0)
    r = run(PolarityInvertedMHA(), "saturation", causal=True)
    # the declared causal mask says "past keys", the layer attends to future keys: the rows are
    # judged on the keys they attend to, not reported as zero-entropy saturation
    assert r.status == "pass", r.message
    assert r.metrics["entropy_norm_mean"] > 0.5
    assert r.metrics["nan_rows"] > 0 and "NaN weights left out" in r.message
