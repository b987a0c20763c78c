"""ResNet-50's layer3 middle convolution: relu(BatchNorm(Conv2d 3x3, 256 -> 256, padding 1)(x)), batch 32 at 14x14,
float32, eval mode: a small-image, compute-bound convolution (6272 output pixels: few tiles for 132 SMs)."""
import torch
import torch.nn as nn

BATCH, CH, SIZE = 32, 256, 14


class Model(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(ch)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, CH, SIZE, SIZE)]


def get_init_inputs():
    return [CH]
