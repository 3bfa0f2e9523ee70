import torch


def fill(s, m, v):
    return s.masked_fill(m, v)


def attend(q, k, m):
    s = q @ k.transpose(-2, -1) * 0.125
    s = fill(s, m, -1e9)
    return s.softmax(-1)


def small(s, m, v):
    return fill(s, m, v)


def tiny(s, m):
    return small(s, m, 0.0)


def unrelated(x):
    return x + 1
