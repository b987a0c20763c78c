"""A tiny SwiGLU MLP for the composer's tests: down(silu(gate(x)) * up(x)) with biased projections
(one gemm_swiglu pattern, then the down projection)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate = nn.Linear(dim, hidden)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


def get_inputs():
    return [torch.randn(4, 8, 16)]


def get_init_inputs():
    return [16, 32]
