import torch.nn as nn


def make():
    class Attn(nn.Module):
        def __init__(self, p):
            super().__init__()
            self.p = p

        def forward(self, x):
            self.p = 0.0
            return x
    return Attn


def unrelated(x):
    return x + 1
