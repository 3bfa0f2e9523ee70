import torch
def add_mask(s, m):
    t = '"""'; s = s.masked_fill(m, -1e9); u = '"""'
    return s


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
