"""Residual add then LayerNorm (post-norm transformer style): LayerNorm(x + y), hidden 1024, (32, 512, 1024), float32."""
import torch
import torch.nn as nn

BATCH, SEQ, HIDDEN = 32, 512, 1024


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.norm(x + y)


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN), torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
