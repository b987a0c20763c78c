"""A small Llama-style decoder block: RMSNorm, grouped-query causal attention (16 query heads, 4 key/value
heads, head dim 64) with rotary position embeddings, residual, RMSNorm, SwiGLU feed-forward (2816), residual.
Hidden 1024, input (4, 512, 1024), float32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, HIDDEN, HEADS, KV_HEADS, INTERMEDIATE = 4, 512, 1024, 16, 4, 2816


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Model(nn.Module):
    def __init__(self, hidden, heads, kv_heads, intermediate, max_seq):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.attn_norm = RMSNorm(hidden)
        self.wq = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.mlp_norm = RMSNorm(hidden)
        self.gate = nn.Linear(hidden, intermediate, bias=False)
        self.up = nn.Linear(hidden, intermediate, bias=False)
        self.down = nn.Linear(intermediate, hidden, bias=False)
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.outer(torch.arange(max_seq).float(), inv_freq)
        self.register_buffer("cos", torch.cat((angles, angles), dim=-1).cos())
        self.register_buffer("sin", torch.cat((angles, angles), dim=-1).sin())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(h).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(h).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.cos[:T], self.sin[:T]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.wo(y)
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, HEADS, KV_HEADS, INTERMEDIATE, SEQ]
