"""A small MLP: three Linear layers with ReLU between them, 1024 -> 2048 -> 2048 -> 1024, batch 4096, float32."""
import torch
import torch.nn as nn

BATCH, IN_FEATURES, HIDDEN, OUT_FEATURES = 4096, 1024, 2048, 1024


class Model(nn.Module):
    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, HIDDEN, OUT_FEATURES]
