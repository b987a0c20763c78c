"""Llama-3-8B-style decoder block: RMSNorm, grouped-query causal attention with rotary embeddings (32 query heads,
8 KV heads, head dim 128), SwiGLU MLP (4096 -> 14336 -> 4096), residual adds. x: (batch 2, seq 2048, 4096), float32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ_LEN = 2, 2048
HIDDEN, N_HEADS, N_KV_HEADS, INTERMEDIATE = 4096, 32, 8, 14336
ROPE_THETA, NORM_EPS = 500000.0, 1e-5


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, hidden, n_heads, n_kv_heads, max_seq_len, rope_theta):
        super().__init__()
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.head_dim = hidden // n_heads
        self.q_proj = nn.Linear(hidden, n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, n_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, n_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(n_heads * self.head_dim, hidden, bias=False)
        # Rotary tables for every position, computed once: angle = position * theta^(-2i/head_dim).
        inv_freq = 1.0 / (rope_theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim))
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("rope_cos", angles.cos())
        self.register_buffer("rope_sin", angles.sin())

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)

        cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin

        # Grouped-query attention: each KV head serves n_heads / n_kv_heads query heads.
        group = self.n_heads // self.n_kv_heads
        k = k[:, :, None].expand(B, self.n_kv_heads, group, T, self.head_dim).reshape(B, self.n_heads, T, self.head_dim)
        v = v[:, :, None].expand(B, self.n_kv_heads, group, T, self.head_dim).reshape(B, self.n_heads, T, self.head_dim)

        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)
        return self.o_proj(y)


class SwiGLU(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Model(nn.Module):
    def __init__(self, hidden, n_heads, n_kv_heads, intermediate, max_seq_len, rope_theta, norm_eps):
        super().__init__()
        self.input_norm = RMSNorm(hidden, norm_eps)
        self.attn = Attention(hidden, n_heads, n_kv_heads, max_seq_len, rope_theta)
        self.post_attn_norm = RMSNorm(hidden, norm_eps)
        self.mlp = SwiGLU(hidden, intermediate)

    def forward(self, x):
        x = x + self.attn(self.input_norm(x))
        x = x + self.mlp(self.post_attn_norm(x))
        return x


def get_inputs():
    return [torch.randn(BATCH, SEQ_LEN, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, N_HEADS, N_KV_HEADS, INTERMEDIATE, SEQ_LEN, ROPE_THETA, NORM_EPS]
