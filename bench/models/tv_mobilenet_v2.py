"""A model of the convolution benchmark (issue 17), in KernelBench's format so `fact bench` and `fact optimize` run
it: torchvision's MobileNetV2 (random weights, no download; depthwise 3x3 and 1x1 convolutions with BatchNorm and
ReLU6) in eval mode, batch 32 at 224x224, fp32."""
import torch
import torchvision

BATCH, SIZE = 32, 224


class Model(torch.nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.net = torchvision.models.mobilenet_v2(weights=None, num_classes=num_classes)

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(BATCH, 3, SIZE, SIZE)]


def get_init_inputs():
    return [1000]
