import torch
X = "'''"
def get_scale(d):
    return d ** 0.5
Y = "'''"

class Attn(torch.nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.hd = d // h

    def forward(self, q, k, v):
        s = (q @ k.transpose(-2, -1)) * get_scale(self.hd)
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
