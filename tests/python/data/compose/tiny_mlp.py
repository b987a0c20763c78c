"""A tiny KernelBench-style MLP block for the composer's tests: Linear, written-out tanh-GELU, Linear,
residual add (two GEMM patterns: gemm_bias_gelu_tanh and gemm_bias_residual)."""
import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        h = self.fc1(x)
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3))))
        return self.fc2(h) + x


def get_inputs():
    return [torch.randn(4, 8, 16)]


def get_init_inputs():
    return [16, 32]
