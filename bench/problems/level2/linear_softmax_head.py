"""Classifier head: Linear (with bias) then softmax over 8192 classes, (2048, 1024) -> (2048, 8192), float32."""
import torch
import torch.nn as nn

ROWS, HIDDEN, CLASSES = 2048, 1024, 8192


class Model(nn.Module):
    def __init__(self, hidden, classes):
        super().__init__()
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.head(x), dim=-1)


def get_inputs():
    return [torch.randn(ROWS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, CLASSES]
