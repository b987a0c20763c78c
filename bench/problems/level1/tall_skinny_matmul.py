"""Tall-skinny matrix multiplication C = A @ B: A is 16384x2048, B is 2048x128 (few output columns), float32."""
import torch
import torch.nn as nn

M, K, N = 16384, 2048, 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
