"""Short-wide matrix multiplication C = A @ B: A is 256x4096, B is 4096x8192 (few rows, many columns), float32."""
import torch
import torch.nn as nn

M, K, N = 256, 4096, 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
