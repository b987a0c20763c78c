"""Rectangular matrix multiplication C = A @ B: A is 1024x4096, B is 4096x2048, C is 1024x2048, float32."""
import torch
import torch.nn as nn

M, K, N = 1024, 4096, 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
