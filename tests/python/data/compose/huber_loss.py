"""A small Huber loss (KernelBench level1/96's graph): smooth_l1_loss, which the tracer replaces by PyTorch's own
decomposition (data/ir/aten_ops.json "decompose"): comparisons and a select, then the whole-tensor mean."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, predictions, targets):
        return torch.nn.functional.smooth_l1_loss(predictions, targets)


def get_inputs():
    return [torch.randn(48, 40) * 2, torch.randn(48, 40)]


def get_init_inputs():
    return []
