# forward returns a namedtuple PyTorch has no serialized name for: the result structure cannot be recorded, so
# FACT leaves the whole module to PyTorch.
import collections
import torch
import torch.nn as nn

Pair = collections.namedtuple("Pair", ["a", "b"])


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x)
        return Pair(torch.relu(y), y * 2)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
