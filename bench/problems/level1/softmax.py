"""Softmax over the last dim of a (32, 1024, 1024) tensor (attention-probability sized rows), float32."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(32, 1024, 1024)]


def get_init_inputs():
    return []
