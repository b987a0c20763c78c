"""BERT-base-style encoder block (post-norm): non-causal attention with 12 heads of 64 through
scaled_dot_product_attention, residual + LayerNorm, GELU feed-forward, residual + LayerNorm.
Input (16, 384, 768), float32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, HIDDEN, HEADS = 16, 384, 768, 12


class Model(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, C)
        x = self.norm1(x + self.out(y))
        return self.norm2(x + self.down(F.gelu(self.up(x))))


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, HEADS]
