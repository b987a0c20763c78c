"""K-heavy matrix multiplication C = A @ B: A is 512x32768, B is 32768x512 (the reduction dominates), float32."""
import torch
import torch.nn as nn

M, K, N = 512, 32768, 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
