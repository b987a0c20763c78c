"""Causal attention written out as minGPT does (lower-triangular mask buffer, masked_fill with -inf, softmax),
head dim 64, odd sequence length 777: q, k, v of (16, 8, 777, 64), float32."""
import math

import torch
import torch.nn as nn

BATCH, HEADS, SEQ, HEAD_DIM = 16, 8, 777, 64


class Model(nn.Module):
    def __init__(self, max_seq):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(max_seq, max_seq)).view(1, 1, max_seq, max_seq))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        T = q.size(-2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        return att @ v


def get_inputs():
    shape = (BATCH, HEADS, SEQ, HEAD_DIM)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return [SEQ]
