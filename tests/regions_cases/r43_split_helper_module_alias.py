import torch
import torch.nn as nn
import torch.nn.functional as F


def unrelated_a(x):
    y = x + 1
    y = y * 2
    return y


class Unrelated(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        return self.lin(x).relu()


def split_heads(x, B, L, H, d):
    return x.view(B, H, L, d)


SPLIT = split_heads


class Attn(nn.Module):
    def __init__(self, dim=32, num_heads=4):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, L, C = x.shape
        q = SPLIT(self.q_proj(x), B, L, self.num_heads, self.head_dim)
        k = SPLIT(self.k_proj(x), B, L, self.num_heads, self.head_dim)
        v = SPLIT(self.v_proj(x), B, L, self.num_heads, self.head_dim)
        return F.scaled_dot_product_attention(q, k, v)


def unrelated_b(x):
    z = x - 1
    z = z / 3
    return z


def unrelated_c(x, y):
    out = []
    for i in range(3):
        out.append(x * i + y)
    return out


class Config:
    hidden = 64
    heads = 8
