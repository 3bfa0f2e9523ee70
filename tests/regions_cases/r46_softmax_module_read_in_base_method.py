import functools
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

def classifier_head(logits, n):
    return logits.view(-1, n)

def _split_impl(mod, t):
    B, L, _ = t.shape
    return t.reshape(B, mod.num_heads, -1, mod.head_dim)

SPLIT = functools.partial(_split_impl)

class Mixin(object):
    def run(self, x):
        B, L, _ = x.shape
        q = SPLIT(self, self.q_proj(x))
        k = SPLIT(self, self.k_proj(x))
        v = SPLIT(self, self.v_proj(x))
        y = self._attend(q, k, v)
        return y.transpose(1, 2).reshape(B, L, self.num_heads * self.head_dim)


class Base(nn.Module):
    def _attend(self, q, k, v):
        s = torch.matmul(q, k.transpose(-2, -1)) * self.head_dim ** -0.5
        return torch.matmul(self.act(s), v)


class Attn(Mixin, Base):
    def __init__(self, dim=32, num_heads=4):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.setup_act()

    def setup_act(self):
        self.act = nn.Softmax(dim=-1)

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
