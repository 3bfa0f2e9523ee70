import torch.nn as nn


class Attn(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.build()

    def build(self):
        self.act = nn.Softmax(dim=1)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        s = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5
        return self.act(s) @ v
