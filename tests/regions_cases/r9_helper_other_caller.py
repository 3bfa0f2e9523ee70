import torch


def invert(keep):
    return ~keep


def attend(q, k, v):
    s = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
    keep = torch.triu(torch.ones(4, 4, dtype=torch.bool))
    s = s.masked_fill(invert(keep), float("-inf"))
    return s.softmax(-1) @ v


def other(n):
    # a second caller of the helper, with another mask: a region parse drops this function
    return invert(torch.tril(torch.ones(n, n, dtype=torch.bool)))


def unrelated(x):
    return x + 1
