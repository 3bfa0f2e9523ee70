import torch


def inner(module, q):
    return module.prep(q)


def eager(module, q, k, v):
    q = inner(module, q)
    s = q @ k.transpose(-2, -1)
    return s.softmax(dim=-1) @ v


class Attn(torch.nn.Module):
    def __init__(self, dim=64, num_heads=8):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads

    def prep(self, q):
        return q

    def forward(self, q, k, v):
        return eager(self, q, k, v)
