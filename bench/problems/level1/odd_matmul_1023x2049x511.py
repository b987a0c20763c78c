"""Matrix multiplication with sizes that fit no tile: C (1023x2049) = A (1023x511) @ B (511x2049), float32."""
import torch
import torch.nn as nn

M, K, N = 1023, 511, 2049


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
