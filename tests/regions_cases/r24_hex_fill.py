import torch


def attend(q, k, v, m):
    s = torch.matmul(q, k.transpose(-2, -1)) * q.size(-1) ** -0.5
    s = s.masked_fill(m, -0xFFFFFF)
    return s.softmax(-1) @ v


def other(x):
    return x * 100000


def unrelated(x):
    return x + 1
