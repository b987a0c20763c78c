"""SwiGLU MLP with biased projections, SiLU written out as g * sigmoid(g) and the product as up * act:
down(up(x) * silu(gate(x))). x: (batch 4, seq 2048, 2048), float32; intermediate 5632 (a 1B-class model's MLP).
Complements the Llama-3 block's bias-free silu(gate(x)) * up(x)."""
import torch
import torch.nn as nn

BATCH, SEQ_LEN = 4, 2048
HIDDEN, INTERMEDIATE = 2048, 5632


class Model(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=True)
        self.up_proj = nn.Linear(hidden, intermediate, bias=True)
        self.down_proj = nn.Linear(intermediate, hidden, bias=True)

    def forward(self, x):
        g = self.gate_proj(x)
        return self.down_proj(self.up_proj(x) * (g * torch.sigmoid(g)))


def get_inputs():
    return [torch.randn(BATCH, SEQ_LEN, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, INTERMEDIATE]
