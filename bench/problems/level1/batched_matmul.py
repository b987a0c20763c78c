"""Batched matrix multiplication with torch.bmm: 128 independent products of (128x256) @ (256x512), float32."""
import torch
import torch.nn as nn

BATCH, M, K, N = 128, 128, 256, 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return []
