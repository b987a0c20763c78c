"""Grouped-query attention (Llama 3 style): 32 query heads share 8 key/value heads, causal, head dim 128,
sequence 1024, batch 4, float32. K and V are repeated to the query heads before the attention."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, Q_HEADS, KV_HEADS, SEQ, HEAD_DIM = 4, 32, 8, 1024, 128


class Model(nn.Module):
    def __init__(self, q_heads, kv_heads):
        super().__init__()
        self.group = q_heads // kv_heads

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        k = k.repeat_interleave(self.group, dim=1)
        v = v.repeat_interleave(self.group, dim=1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    return [torch.randn(BATCH, Q_HEADS, SEQ, HEAD_DIM), torch.randn(BATCH, KV_HEADS, SEQ, HEAD_DIM),
            torch.randn(BATCH, KV_HEADS, SEQ, HEAD_DIM)]


def get_init_inputs():
    return [Q_HEADS, KV_HEADS]
