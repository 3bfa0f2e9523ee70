import torch

BIG = -1e9
NEG = BIG


def attend(q, k, v, m):
    s = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
    return s.masked_fill(m, NEG).softmax(-1) @ v


def unrelated(x):
    return x + 1
