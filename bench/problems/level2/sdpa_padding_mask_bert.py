"""Scaled-dot-product attention with a padding mask, at BERT-base's shape: q, k, v of (32, 12, 256, 64), float32, and
the bool [batch, 1, seq, seq] mask Hugging Face's BERT builds from a tokenizer's attention_mask (keys past each
sentence's length masked; one mask for every head)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, HEADS, SEQ, HEAD_DIM = 32, 12, 256, 64
DTYPE = torch.float32


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def get_inputs():
    shape = (BATCH, HEADS, SEQ, HEAD_DIM)
    lengths = torch.randint(SEQ // 4, SEQ + 1, (BATCH,))
    keep = torch.arange(SEQ)[None, :] < lengths[:, None]                 # [batch, seq_k]
    mask = keep[:, None, None, :].expand(BATCH, 1, SEQ, SEQ).contiguous()  # [batch, 1, seq_q, seq_k]
    return [torch.randn(shape, dtype=DTYPE), torch.randn(shape, dtype=DTYPE), torch.randn(shape, dtype=DTYPE), mask]


def get_init_inputs():
    return []
