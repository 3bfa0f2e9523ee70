import torch.nn as nn


class Attn(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def set_temperature(self, t):
        self.scale = 1.0

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        s = (q @ k.transpose(-2, -1)) * self.scale
        return s.softmax(-1) @ v
