"""A head split in one method, the attention in another, both called from ``forward``; a
classifier head's view of the same shape in a class that forms no attention."""
import torch
import torch.nn as nn


def unrelated(x, n):
    return x.reshape(n, -1).sum(0)


class Attention(nn.Module):
    def __init__(self, dim=32, num_heads=4):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def _split(self, x, B, L):
        return x.view(B, self.num_heads, L, self.head_dim)

    def _attend(self, q, k, v):
        w = torch.softmax(q @ k.transpose(-2, -1) * self.head_dim ** -0.5, dim=-1)
        return w @ v

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = self._split(q, B, L), self._split(k, B, L), self._split(v, B, L)
        return self._attend(q, k, v).transpose(1, 2).reshape(B, L, C)


class Head(nn.Module):
    def __init__(self, dim=32, num_heads=4):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, L, C = x.shape
        return self.proj(x).view(B, self.num_heads, L, self.head_dim).mean(2)
