"""Pools whose ops after them join their generated kernel: a 2x2 max pool then mish (KernelBench level2/35's tail),
and a padded 3x3 average pool without the padding in its divisor then softmax over the channels (strided rows)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, y):
        a = F.mish(F.max_pool2d(x, 2))
        b = torch.softmax(F.avg_pool2d(y, 3, stride=2, padding=1, count_include_pad=False), dim=1)
        return a, b


def get_inputs():
    return [torch.randn(2, 4, 10, 14), torch.randn(2, 6, 7, 9)]


def get_init_inputs():
    return []
