import torch
import torch.nn as nn
import torch.nn.functional as F


class Attn(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        w = torch.softmax(x @ x.transpose(-2, -1) * x.size(-1) ** -0.5, dim=-1)
        return F.dropout (w, self.p)
