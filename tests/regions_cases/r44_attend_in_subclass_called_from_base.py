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


class Base(nn.Module):
    def __init__(self, dim=32, num_heads=4):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)

    def run(self, x):
        B, L, C = x.shape
        q = self.q_proj(x).view(B, self.num_heads, L, self.head_dim)
        k = self.k_proj(x).view(B, self.num_heads, L, self.head_dim)
        v = self.v_proj(x).view(B, self.num_heads, L, self.head_dim)
        return self.attend(q, k, v)


class Sub(Base):
    def attend(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    def forward(self, x):
        return self.run(x)


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
