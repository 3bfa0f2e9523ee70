import torch
import torch.nn as nn


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        big = -1e9
        self.fill_value = big

    def forward(self, q, k, v, pad):
        s = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
        s = s.masked_fill(pad, self.fill_value)
        return s.softmax(-1) @ v
