"""Residual add then RMSNorm (Llama's pre-norm step): returns RMSNorm(x + y), hidden 4096, (8, 1024, 4096), float32."""
import torch
import torch.nn as nn

BATCH, SEQ, HIDDEN = 8, 1024, 4096


class Model(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden) + 0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = x + y
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN), torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
