"""Decode-style matrix multiplication: 8 rows against a 8192x8192 weight (A is 8x8192, B is 8192x8192), float32."""
import torch
import torch.nn as nn

M, K, N = 8, 8192, 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
