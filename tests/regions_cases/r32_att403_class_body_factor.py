import torch

k = torch.ones(2, 2, 4, 8)
kk = k.repeat(1, r, 1, 1)


class A:
    r = num_heads // num_kv_heads
