"""One decode step of grouped-query attention against a KV cache (Llama 3 8B's heads): the new token's query, 32 heads,
against 4096 cached keys and values of 8 heads, head dim 128, batch 8, float32, no mask (the step attends every cached
key). The 128-row query tiles of prefill kernels would hold one row; FACT's decode kernel splits the keys instead."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, Q_HEADS, KV_HEADS, CACHED, HEAD_DIM = 8, 32, 8, 4096, 128


class Model(nn.Module):
    def __init__(self, q_heads, kv_heads):
        super().__init__()
        self.group = q_heads // kv_heads

    def repeat_kv(self, x: torch.Tensor) -> torch.Tensor:
        # transformers' repeat_kv: each K/V head serves `group` consecutive query heads.
        b, h, t, d = x.shape
        return x[:, :, None, :, :].expand(b, h, self.group, t, d).reshape(b, h * self.group, t, d)

    def forward(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, self.repeat_kv(k_cache), self.repeat_kv(v_cache))


def get_inputs():
    return [torch.randn(BATCH, Q_HEADS, 1, HEAD_DIM), torch.randn(BATCH, KV_HEADS, CACHED, HEAD_DIM),
            torch.randn(BATCH, KV_HEADS, CACHED, HEAD_DIM)]


def get_init_inputs():
    return [Q_HEADS, KV_HEADS]
