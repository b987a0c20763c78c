"""C = A @ B.t() with B stored as (N, K), the layout of nn.Linear's weight: A is 2048x1024, B is 3072x1024, float32."""
import torch
import torch.nn as nn

M, K, N = 2048, 1024, 3072


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B.t())


def get_inputs():
    return [torch.randn(M, K), torch.randn(N, K)]


def get_init_inputs():
    return []
