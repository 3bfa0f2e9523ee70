import torch

r = num_heads // num_kv_heads
k = torch.randn(2, 8, 16, 64)
k = k.repeat(1, r, 1, 1)


def unrelated(x):
    return x + 1
