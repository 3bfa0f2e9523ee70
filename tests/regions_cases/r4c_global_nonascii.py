import torch
ÇAUSAL = torch.triu(torch.ones(8, 8)).bool()


def attend(q, k, v):
    s = (q @ k.transpose(-2, -1)) * q.size(-1) ** -0.5
    s = s.masked_fill(ÇAUSAL, float("-inf"))
    return s.softmax(-1) @ v


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
