"""ViT-B/16 encoder block (pre-norm): LayerNorm, non-causal attention over 197 tokens (196 patches + class
token: an odd sequence length) with 12 heads of 64, residual, LayerNorm, GELU MLP, residual.
Input (64, 197, 768), float32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, TOKENS, HIDDEN, HEADS = 64, 197, 768, 12


class Model(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(hidden, eps=1e-6)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden, eps=1e-6)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def get_inputs():
    return [torch.randn(BATCH, TOKENS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, HEADS]
