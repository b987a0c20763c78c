"""Hugging Face GPT-2's MLP up-projection at a small size: Conv1D (addmm on the flattened rows, viewed back to
[batch, seq, out]) then the written-out tanh GELU (NewGELUActivation)."""
import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, nx=32, nf=48):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.1)
        self.bias = nn.Parameter(torch.randn(nf) * 0.1)
        self.nf = nf

    def forward(self, x):
        h = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(*x.shape[:-1], self.nf)
        return 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))


def get_inputs():
    return [torch.randn(4, 16, 32)]


def get_init_inputs():
    return []
