import torch


def other(x):
    limit = 1e9
    return min(x, limit)


def attn(q, k, mask):
    min_val = -1000
    s = q @ k.transpose(-1, -2)
    s = s.masked_fill(mask, min_val * 1000)
    return s.softmax(-1)
