import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import einsum as es

def unrelated_a(x):
    y = x + 1
    y = y * 2
    return y

class Base(nn.Module):
    @staticmethod
    def _attend(mod, q, k, v):
        s = es('bhld,bhmd->bhlm', q, k) * mod.head_dim ** -0.5
        return es('bhlm,bhmd->bhld', mod.act(s), v)


class Attn(Base):
    def __init__(self, dim=32, num_heads=4):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.act = nn.Softmax(dim=-1)

    def _split(self, t):
        B, L, _ = t.shape
        return t.view(B, L, self.num_heads, self.head_dim).transpose(1, 2)

    def _merge(self, y, B, L):
        return y.contiguous().view(B, L, -1)

    def forward(self, x):
        B, L, _ = x.shape
        q, k, v = [self._split(t) for t in (self.q_proj(x), self.k_proj(x), self.v_proj(x))]
        y = self._attend(self, q, k, v)
        return self._merge(y, B, L)



def unrelated_c(x, y):
    out = []
    for i in range(3):
        out.append(x * i + y)
    return out

def unrelated_b(x):
    z = x - 1
    z = z / 3
    return z

class Config:
    hidden = 64
    heads = 8
