import torch

NEG = -1e9


class Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        neg = NEG
        self.fill = neg

    def forward(self, q, k, mask):
        s = q @ k.transpose(-2, -1)
        s = s.masked_fill(mask, self.fill)
        return s.softmax(-1)
