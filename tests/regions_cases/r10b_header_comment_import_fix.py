# Copyright 2024 Example Authors
import torch


def attend(q, k, v, pad):
    s = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
    s = s.masked_fill(pad, -1e9)
    return torch.softmax(s, dim=-1) @ v


def unrelated(x):
    return x + 1
