"""Matrix multiplication with a very long reduction: A is 256x131072, B is 131072x256, C is 256x256, float32."""
import torch
import torch.nn as nn

M, K, N = 256, 131072, 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
