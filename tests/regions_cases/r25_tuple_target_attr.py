import torch.nn as nn


class Attn(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.sm, self.drop = nn.Softmax(dim=1), nn.Dropout(0.1)

    def forward(self, x):
        B, L, C = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-2, -1)
        return self.sm(s) @ v


def unrelated(x):
    return x + 1
