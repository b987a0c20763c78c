"""Matrix multiplication with a short reduction: A is 8192x64, B is 64x8192 (an outer-product-like GEMM, memory-bound), float32."""
import torch
import torch.nn as nn

M, K, N = 8192, 64, 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
