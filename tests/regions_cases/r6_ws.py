import torch.nn as nn
import torch.nn.functional as F


class Attn(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return F.dropout (x, self.p)
