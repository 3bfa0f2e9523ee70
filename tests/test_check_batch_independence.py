"""``batch-independence``: samples do not influence each other."""
import torch
from _check_helpers import run, run_case
from torch import nn


class SoftmaxOverBatch(nn.Module):
    """Buggy: softmax over the batch axis (dim=0) of (B, L, L) scores."""

    def __init__(self, dim=8):
        super().__init__()
        self.embed_dim = dim
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return torch.softmax(q @ k.transpose(1, 2) / 8 ** 0.5, dim=0) @ v


def test_mha_passes_bit_identical():
    r = run(nn.MultiheadAttention(16, 2, batch_first=True), "batch-independence")
    assert r.status == "pass", r.message
    assert r.metrics["perturb_max_delta"] == 0.0 and r.metrics["alone_max_diff"] < 1e-5
    assert r.metrics["examples"] >= 1


def test_mask_repeat_b28_fails():
    r = run_case("b28_mask_repeat_vs_repeat_interleave", "batch-independence")
    assert r.status == "fail", r.message
    assert r.metrics["example"]["B"] >= 2
    assert r.metrics["alone_max_diff"] > 0.01 or r.metrics["perturb_max_delta"] > 0.01


def test_softmax_over_batch_fails_on_perturbation():
    r = run(SoftmaxOverBatch(), "batch-independence", causal=False)
    assert r.status == "fail"
    assert "perturbed" in r.message
    assert r.metrics["perturb_max_delta"] > 1e-3
    assert "reproduce" in r.details


class CausalAlongTheBatchAxis(nn.Module):
    """Buggy: a sequence-first nn.MultiheadAttention with a causal mask over its first axis, fed
    (B, L, E): each sample sees the samples before it, never the ones after."""

    def __init__(self, dim=16):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, 2)

    def forward(self, x):
        n = x.size(0)
        blocked = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        return self.attn(x, x, x, attn_mask=blocked)[0]


def test_mixing_forward_along_the_batch_fails_on_perturbing_the_first_sample():
    r = run(CausalAlongTheBatchAxis(), "batch-independence", causal=False)
    assert r.status == "fail", r.message
    assert "when sample 0 was perturbed" in r.message and "batch_first" in r.message
    assert r.metrics["perturb_max_delta"] > 1e-3
