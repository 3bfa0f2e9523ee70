import torch


def attend(q, k, v):
    s = (q @ k.transpose(-2, -1)) * q.size(-1) ** -0.5
    return s.masked_fill(s > 0, -0xFFFF).softmax(-1) @ v
