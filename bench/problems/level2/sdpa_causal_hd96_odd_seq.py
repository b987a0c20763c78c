"""Causal scaled-dot-product attention, head dim 96, odd sequence length 1531: (4, 12, 1531, 96), float32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, HEADS, SEQ, HEAD_DIM = 4, 12, 1531, 96


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    shape = (BATCH, HEADS, SEQ, HEAD_DIM)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
