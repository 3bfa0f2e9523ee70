import torch


def attend(q, k, v, m):
    s = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
    s = s.masked_fill(invert(m), float("-inf"))
    return s.softmax(-1) @ v


def other(x):
    return x
def invert(keep):
    return torch.triu(keep)
