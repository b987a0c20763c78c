"""Scaled-dot-product attention with an additive float mask shared by the batch: q, k, v of (16, 16, 512, 64),
float32, and an ALiBi-style [heads, seq, seq] bias (a per-head slope times the key's distance behind the query, -inf
ahead of it: causal through the mask)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, HEADS, SEQ, HEAD_DIM = 16, 16, 512, 64
DTYPE = torch.float32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        slopes = 2.0 ** (-8.0 * torch.arange(1, HEADS + 1) / HEADS)
        distance = torch.arange(SEQ)[None, :] - torch.arange(SEQ)[:, None]  # key - query
        bias = slopes[:, None, None] * distance.clamp(max=0)[None]
        self.register_buffer("bias", bias.masked_fill(distance[None] > 0, float("-inf")).to(DTYPE))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias)


def get_inputs():
    shape = (BATCH, HEADS, SEQ, HEAD_DIM)
    return [torch.randn(shape, dtype=DTYPE), torch.randn(shape, dtype=DTYPE), torch.randn(shape, dtype=DTYPE)]


def get_init_inputs():
    return []
