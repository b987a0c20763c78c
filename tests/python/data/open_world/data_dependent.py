# forward branches on a tensor's value: torch.export cannot trace it, so FACT leaves the whole module to PyTorch.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        y = self.fc(x)
        if y.sum() > 0:
            return torch.relu(y)
        return y * 2


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
