import torch


def combine(mask_a, mask_b):
    return mask_a + mask_b


def both(x, pad, causal):
    a = torch.zeros(4, 4).masked_fill(pad, torch.finfo(x.dtype).min)
    b = torch.zeros(4, 4).masked_fill(causal, torch.finfo(x.dtype).min)
    return combine(a, b)


def other(n):
    return combine(torch.tril(torch.ones(n, n)), torch.tril(torch.ones(n, n)))


def unrelated(x):
    return x + 1
