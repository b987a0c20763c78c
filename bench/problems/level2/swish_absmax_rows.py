"""A row-wise op chain no FACT rule covers: scaled swish, then each row divided by its largest |value|
(the absmax scaling used before 8-bit quantization). PyTorch runs it as seven kernels."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float = 1.702, eps: float = 1e-6):
        super().__init__()
        self.scale = scale
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * torch.sigmoid(x) * self.scale
        return y / (y.abs().amax(dim=-1, keepdim=True) + self.eps)


rows, cols = 16384, 4096


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [1.702, 1e-6]
