"""Matrix multiplication with prime sizes: C (1999x3001) = A (1999x1531) @ B (1531x3001), float32."""
import torch
import torch.nn as nn

M, K, N = 1999, 1531, 3001


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
