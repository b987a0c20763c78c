"""Llama feed-forward (SwiGLU): down(silu(gate(x)) * up(x)), hidden 2048, intermediate 5632, no biases,
on (4, 1024, 2048), float32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, HIDDEN, INTERMEDIATE = 4, 1024, 2048, 5632


class Model(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate = nn.Linear(hidden, intermediate, bias=False)
        self.up = nn.Linear(hidden, intermediate, bias=False)
        self.down = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, INTERMEDIATE]
