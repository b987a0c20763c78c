"""Batched matrix multiplication of many small matrices, as in attention scores: 256 x (256x64 @ 64x256), float32."""
import torch
import torch.nn as nn

BATCH, M, K, N = 256, 256, 64, 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return []
