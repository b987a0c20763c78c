"""Linear (with bias) then tanh-approximated GELU: (8192, 1024) -> (8192, 4096), float32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS, IN_FEATURES, OUT_FEATURES = 8192, 1024, 4096


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc(x), approximate="tanh")


def get_inputs():
    return [torch.randn(ROWS, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
