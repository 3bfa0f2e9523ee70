import torch.nn as nn


class Attn(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def __attend(self, q, k, v):
        s = q @ k.transpose(-2, -1)
        return s.softmax(-1) @ v

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.__attend(q, k, v)

    def unrelated(self, x):
        return x + 1
