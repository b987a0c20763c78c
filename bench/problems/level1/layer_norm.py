"""LayerNorm over the last dim (1024, with weight and bias) of a (64, 512, 1024) activation, float32."""
import torch
import torch.nn as nn

BATCH, SEQ, HIDDEN = 64, 512, 1024


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
