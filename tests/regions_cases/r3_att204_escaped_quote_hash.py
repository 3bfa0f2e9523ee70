import torch
def add_mask(s, m):
    return s.masked_fill(m["\"#"], -1e9)


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
