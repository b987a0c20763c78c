"""Softmax over rows of an odd length: a (4093, 5003) tensor along dim 1 (no power-of-two anywhere), float32."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(4093, 5003)]


def get_init_inputs():
    return []
