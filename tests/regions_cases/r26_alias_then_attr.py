import torch
import torch.nn as nn

NEG = -1e9


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.neg = NEG

    def forward(self, q, k, v, m):
        s = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
        return s.masked_fill(m, self.neg).softmax(-1) @ v


def unrelated(x):
    return x + 1
