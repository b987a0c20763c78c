"""ResNet's stem: relu(BatchNorm(Conv2d 7x7, 3 -> 64, stride 2, padding 3)(x)), batch 32 at 224x224, float32, eval
mode: an image's 3 channels (16 bytes a pixel for TMA), the case of the conv family's width-tap fold."""
import torch
import torch.nn as nn

BATCH, SIZE = 32, 224


class Model(nn.Module):
    def __init__(self, out_ch):
        super().__init__()
        self.conv = nn.Conv2d(3, out_ch, 7, stride=2, padding=3, bias=False)
        self.bn = nn.BatchNorm2d(out_ch)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, 3, SIZE, SIZE)]


def get_init_inputs():
    return [64]
