"""KernelBench level2/31's pattern at a small size, on a linear layer: forward() makes a tensor constant from a
Python number (torch.tensor(self.value)), which the module does not keep, and takes the elementwise minimum with it."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n=32, k=48, value=0.25):
        super().__init__()
        self.fc = nn.Linear(n, k)
        self.value = value

    def forward(self, x):
        x = self.fc(x)
        x = torch.min(x, torch.tensor(self.value))
        return x * 2.0


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
