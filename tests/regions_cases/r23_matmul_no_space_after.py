import torch


def attend(q, k, v):
    n = q.size(-2)
    s = q @k.transpose(-2, -1) * q.size(-1) ** -0.5
    m = torch.tril(torch.ones(n, n, dtype=torch.bool))
    s = s + m
    return s


def probs(s):
    return s.softmax(-1)


def unrelated(x):
    return x + 1
