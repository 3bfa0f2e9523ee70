import torch

CAUSAL = torch.tril(torch.ones(4, 4, dtype=torch.bool))


def attend(q, k, layer):
    s = q @ k.transpose(-2, -1) + CAUSAL
    return layer.helper(s)


class Other:
    def helper(self, x):
        return x.masked_fill(x > 0, 0)
