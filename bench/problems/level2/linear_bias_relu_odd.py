"""Linear (with bias) then ReLU at sizes no tile divides: (1000, 1531) -> (1000, 777), float32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS, IN_FEATURES, OUT_FEATURES = 1000, 1531, 777


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.fc(x))


def get_inputs():
    return [torch.randn(ROWS, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
