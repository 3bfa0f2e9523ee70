import math
import torch
import torch.nn as nn
import torch.nn.functional as F

def filler_0(x, y=3):
    """Docstring 0."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z

def filler_1(x, y=3):
    """Docstring 1."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z

def filler_2(x, y=3):
    """Docstring 2."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z

def filler_3(x, y=3):
    """Docstring 3."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z

def filler_4(x, y=3):
    """Docstring 4."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z

def filler_5(x, y=3):
    """Docstring 5."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z

def filler_6(x, y=3):
    """Docstring 6."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z

def filler_7(x, y=3):
    """Docstring 7."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z

def filler_8(x, y=3):
    """Docstring 8."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z

def filler_9(x, y=3):
    """Docstring 9."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z

class Attn(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.d = d
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view (B, self.h, L, C // self.h)
        k = k.view (B, self.h, L, C // self.h)
        v = v.view (B, self.h, L, C // self.h)
        return F.scaled_dot_product_attention(q, k, v)

def filler_40(x, y=3):
    """Docstring 40."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z

def filler_41(x, y=3):
    """Docstring 41."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z

def filler_42(x, y=3):
    """Docstring 42."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z

def filler_43(x, y=3):
    """Docstring 43."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z

def filler_44(x, y=3):
    """Docstring 44."""
    z = x + y
    for _ in range(3):
        z = z * 2
    return z
