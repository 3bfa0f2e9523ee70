"""The attention is a method of a same-file base class; the subclass splits the heads without
the transpose and merges them in a module-level helper."""
import torch.nn as nn
import torch.nn.functional as F


def merge(y, B, L, C):
    return y.reshape(B, L, C)


def unrelated(x, n):
    return x.reshape(n, -1).sum(0)


class Base(nn.Module):
    def attend(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


class Attention(Base):
    def __init__(self, dim=32, num_heads=4):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(B * self.num_heads, L, self.head_dim) for t in (q, k, v))
        return merge(self.attend(q, k, v), B, L, C)
