"""RMSNorm written out as Llama does it: x * rsqrt(mean(x^2) + eps) * weight, hidden 4096, on (16, 512, 4096), float32."""
import torch
import torch.nn as nn

BATCH, SEQ, HIDDEN = 16, 512, 4096


class Model(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden) + 0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed * self.weight


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
