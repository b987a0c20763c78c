"""A model of the convolution benchmark (issue 17), in KernelBench's format so `fact bench` and `fact optimize` run
it: torchvision's ResNet-50 (random weights, no download) in eval mode, batch 32 at 224x224, fp32."""
import torch
import torchvision

BATCH, SIZE = 32, 224


class Model(torch.nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.net = torchvision.models.resnet50(weights=None, num_classes=num_classes)

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(BATCH, 3, SIZE, SIZE)]


def get_init_inputs():
    return [1000]
