import functools
import torch
import torch.nn as nn
import torch.nn.functional as F
from flash_attn import flash_attn_func as faf

def classifier_head(logits, n):
    return logits.view(-1, n)

def unrelated_a(x):
    y = x + 1
    y = y * 2
    return y

def _keep(fn):
    return fn

@_keep
def split_fn(mod, t):
    B, L, _ = t.shape
    return t.view(B, L, mod.num_heads, mod.head_dim).transpose(1, 2)

def _attend_impl(mod, q, k, v):
    return faf(q, k, v).transpose(1, 2)

ATTEND = _attend_impl

class Base(nn.Module):
    @staticmethod
    def _merge(mod, y, B, L):
        return y.transpose(1, 2).reshape(B, L, mod.num_heads * mod.head_dim)


class Attn(Base):
    def __init__(self, dim=32, num_heads=4):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)


def attention_block(mod, x):
    B, L, _ = x.shape
    q = split_fn(mod, mod.q_proj(x))
    k = split_fn(mod, mod.k_proj(x))
    v = split_fn(mod, mod.v_proj(x))
    y = ATTEND(mod, q, k, v)
    return mod._merge(mod, y, B, L)


class Config:
    hidden = 64
    heads = 8

def unrelated_c(x, y):
    out = []
    for i in range(3):
        out.append(x * i + y)
    return out

def unrelated_d(t):
    b, l, c = t.shape
    return t.reshape(b * l, c)

def unrelated_b(x):
    z = x - 1
    z = z / 3
    return z
