"""ResNet-50's layer4 entry block and its global average pool, batch 32, 1024 x 14 x 14 in, float32, eval mode: the
block's last 1x1 convolution adds the downsampled identity (another convolution's output, channels-last between
FACT's kernels) and ReLU, and the pool over the 7 x 7 pixels follows, as torchvision's avgpool + flatten. FACT's last
convolution averages each image's pixels in its epilogue instead of writing the block's output: a chain of
convolutions whose exit reduces, reading its x and its residual channels-last in place."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, IN_CH, MID_CH, OUT_CH, SIZE = 32, 1024, 512, 2048, 14


class Model(nn.Module):
    def __init__(self, in_ch, mid_ch, out_ch):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, mid_ch, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid_ch)
        self.conv2 = nn.Conv2d(mid_ch, mid_ch, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid_ch)
        self.conv3 = nn.Conv2d(mid_ch, out_ch, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.down = nn.Conv2d(in_ch, out_ch, 1, stride=2, bias=False)
        self.bn_down = nn.BatchNorm2d(out_ch)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = self.bn_down(self.down(x))
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = torch.relu(self.bn3(self.conv3(y)) + identity)
        return torch.flatten(F.adaptive_avg_pool2d(y, 1), 1)


def get_inputs():
    return [torch.randn(BATCH, IN_CH, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CH, MID_CH, OUT_CH]
