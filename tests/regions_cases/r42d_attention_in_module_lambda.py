"""The attention is a module-level binding (a lambda) the method calls by name;
the merge of its output misses the transpose."""
import torch
import torch.nn as nn

ATTEND = lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5, dim=-1) @ v


def unrelated(x, n):
    return x.reshape(n, -1).sum(0)


class Attention(nn.Module):
    def __init__(self, dim=32, num_heads=4):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(B, L, self.num_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        return ATTEND(q, k, v).reshape(B, L, C)
