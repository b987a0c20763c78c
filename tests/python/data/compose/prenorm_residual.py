"""Two pre-norm residual steps for the add-norm composer tests: h = x + y feeds a LayerNorm and the next
residual add; g = h + relu(fc(LayerNorm(h))) feeds a written-out RMSNorm and is returned too. Both sums are
read again after their norm, so each add-norm op must return (normed, sum). Odd sizes: 3 x 5 rows of 48."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x, y):
        h = x + y
        g = h + torch.relu(self.fc(self.ln(h)))
        r = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        return g, r


def get_inputs():
    return [torch.randn(3, 5, 48), torch.randn(3, 5, 48)]


def get_init_inputs():
    return [48]
