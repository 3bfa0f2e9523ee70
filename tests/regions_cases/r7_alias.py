import torch.nn as nn
from torch.nn.functional import dropout as drop


class Attn(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return drop(x, self.p)
