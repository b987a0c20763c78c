"""ResNet-50's layer4 entry to a bottleneck: relu(BatchNorm(Conv2d 1x1, 2048 -> 512)(x)), batch 32 at 7x7, float32,
eval mode: 1568 output pixels of a 2048-long K loop, fewer tiles than a GPU runs at once (split-K's case)."""
import torch
import torch.nn as nn

BATCH, IN_CH, OUT_CH, SIZE = 32, 2048, 512, 7


class Model(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, 1, bias=False)
        self.bn = nn.BatchNorm2d(out_ch)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, IN_CH, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CH, OUT_CH]
