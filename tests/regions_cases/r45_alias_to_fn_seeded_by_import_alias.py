import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.functional import scaled_dot_product_attention as sdpa

def classifier_head(logits, n):
    return logits.view(-1, n)

class Unrelated(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        return self.lin(x).relu()

def unrelated_a(x):
    y = x + 1
    y = y * 2
    return y

def _attend_impl(mod, q, k, v):
    return sdpa(q, k, v)

ATTEND = _attend_impl

class Base(nn.Module):
    def _merge(self, y, B, L):
        return y.transpose(1, 2).reshape(B, L, self.num_heads * self.head_dim)


class Attn(Base):
    def __init__(self, dim=32, num_heads=4):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)

    def compute(self, x):
        B, L, _ = x.shape
        q = self.q_proj(x).reshape(B, self.num_heads, -1, self.head_dim)
        k = self.k_proj(x).reshape(B, self.num_heads, -1, self.head_dim)
        v = self.v_proj(x).reshape(B, self.num_heads, -1, self.head_dim)
        y = ATTEND(self, q, k, v)
        return self._merge(y, B, L)



def unrelated_b(x):
    z = x - 1
    z = z / 3
    return z
