"""Non-causal scaled-dot-product attention, head dim 128: q, k, v of (8, 16, 1024, 128), float32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, HEADS, SEQ, HEAD_DIM = 8, 16, 1024, 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=False)


def get_inputs():
    shape = (BATCH, HEADS, SEQ, HEAD_DIM)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
