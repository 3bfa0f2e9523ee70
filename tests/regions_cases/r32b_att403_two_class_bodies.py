import torch


class A:
    kk = k.repeat(1, r, 1, 1)


class B:
    r = num_heads // num_kv_heads
