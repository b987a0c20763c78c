"""Transformer feed-forward: Linear 768 -> 3072, exact GELU, Linear 3072 -> 768, on (16, 512, 768), float32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, HIDDEN = 16, 512, 768


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
