"""Linear (with bias) then SiLU: (4096, 2048) -> (4096, 5632), float32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS, IN_FEATURES, OUT_FEATURES = 4096, 2048, 5632


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.fc(x))


def get_inputs():
    return [torch.randn(ROWS, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
