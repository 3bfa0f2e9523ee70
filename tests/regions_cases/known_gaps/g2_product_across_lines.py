import torch


def other(x):
    limit = 1e9
    return min(x, limit)


def attn(q, k, mask):
    s = q @ k.transpose(-1, -2)
    s = s.masked_fill(mask, (-1000
        * 1000))
    return s.softmax(-1)
