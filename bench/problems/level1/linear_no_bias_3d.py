"""nn.Linear without bias on a (batch, seq, hidden) activation: (8, 512, 2048) -> (8, 512, 2048), float32."""
import torch
import torch.nn as nn

BATCH, SEQ, HIDDEN = 8, 512, 2048


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.proj = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
