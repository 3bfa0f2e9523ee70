import torch
try: import torch.nn.functional as F
except ImportError: pass


def attend(q, k, v):
    s = q @ k.transpose(-2, -1)
    return F.softmax(s, dim=-1) @ v


def unrelated(x):
    return x + 1
