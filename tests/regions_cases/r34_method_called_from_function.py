import torch


def eager(self, q, k, v):
    return self.attend(q, k, v)


class Attn(torch.nn.Module):
    def attend(self, q, k, v, sm_scale=1.0):
        s = (q @ k.transpose(-2, -1)) * sm_scale
        return s.softmax(dim=-1) @ v

    def forward(self, q, k, v):
        return eager(self, q, k, v)
