# Copyright header
import torch.nn.functional as F


def attend(q, k, v):
    s = q @ k.transpose(-2, -1)
    return F.softmax(s, dim=-1) @ v


def unrelated(x):
    return x + 1
