import torch

def škala(d):
    return d ** 0.5


class Attn(torch.nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.hd = d // h

    def forward(self, q, k, v):
        s = (q @ k.transpose(-2, -1)) * škala(self.hd)
        return s.softmax(dim=-1) @ v


def unrelated():
    return 1
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
# pad
