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

def attend(q, k, v):
    s = (q @ k.transpose(-2, -1)) * q.size(-1) ** -0.5
    e = torch.exp (s)
    p = e / e.sum(-1, keepdim=True)
    return p @ v

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
