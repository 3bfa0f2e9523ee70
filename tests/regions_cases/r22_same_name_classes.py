import torch
import torch.nn as nn


class Attn(nn.Module):
    def forward(self, q, k, v, mask):
        s = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
        s = s.masked_fill(mask, float("-inf"))
        return s.softmax(-1) @ v

    def generate(self, q, k, v):
        n = q.size(-2)
        return self.forward(q, k, v, torch.tril(torch.ones(n, n, dtype=torch.bool)))


class Attn(nn.Module):
    def extra(self):
        return 0

    def forward(self, q, k, v, mask):
        return v

    def generate(self, q, k, v):
        n = q.size(-2)
        return self.forward(q, k, v, torch.triu(torch.ones(n, n, dtype=torch.bool), 1))


def unrelated(x):
    return x + 1
