"""gelu(Conv2d 5x5, 3 -> 32, stride (1, 2), dilation 2, padding 4, bias)(x), batch 16 at 200x121, float32: an
odd width, dilated taps and a stride only along the width (what the width-tap fold's gather walks)."""
import torch
import torch.nn as nn

BATCH, H, W = 16, 200, 121


class Model(nn.Module):
    def __init__(self, out_ch):
        super().__init__()
        self.conv = nn.Conv2d(3, out_ch, 5, stride=(1, 2), padding=4, dilation=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.conv(x))


def get_inputs():
    return [torch.randn(BATCH, 3, H, W)]


def get_init_inputs():
    return [32]
