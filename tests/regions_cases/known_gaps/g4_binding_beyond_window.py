import torch

NEG_INF = (
    # the mask value
    # used below
    # for padding
    # positions
    -1e9
)


def attn(q, k, mask):
    s = q @ k.transpose(-1, -2)
    s = s.masked_fill(mask, NEG_INF)
    return s.softmax(-1)
