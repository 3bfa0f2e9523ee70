import torch


def fill(s, m, v):
    return s.masked_fill(m, v).softmax(-1)


def big(s, m):
    return fill(s, m, -1e9)


def small(s, m):
    return fill(s, m, 0.0)


def unrelated(x):
    return x + 1
