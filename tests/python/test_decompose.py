"""python/fact/decompose.py on exported graphs (CPU): listed losses become PyTorch's own decomposition, values-only
(max, indices) reductions become amax / amin, and the rewritten program still computes the module's value."""
import pytest

torch = pytest.importorskip("torch")

from fact.decompose import decompose_listed  # noqa: E402


def ops_of(ep) -> list[str]:
    return [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]


class Huber(torch.nn.Module):
    def forward(self, p, t):
        return torch.nn.functional.smooth_l1_loss(p, t)


class MaxValues(torch.nn.Module):
    def forward(self, x):
        v = torch.max(x, dim=1, keepdim=True)[0]
        return x - v + torch.min(x, 0).values


class GlobalAverage(torch.nn.Module):
    def __init__(self, size=1):
        super().__init__()
        self.pool = torch.nn.AdaptiveAvgPool2d(size)

    def forward(self, x):
        return self.pool(x) * 2.0


class Aliases(torch.nn.Module):
    """KernelBench's Conv2d_Activation_BatchNorm writes torch.multiply: its own ATen overload, an alias of mul."""
    def forward(self, x, y):
        return torch.clip(torch.true_divide(torch.subtract(torch.multiply(x, y), 1.0), 3.0), -1.0, 1.0)


class MaxWithIndices(torch.nn.Module):
    def forward(self, x):
        v, i = torch.max(x, dim=1)
        return v + i.float()


@pytest.mark.parametrize("model, inputs, gone, added", [
    (Huber(), (torch.randn(6, 5), torch.randn(6, 5)), "aten.smooth_l1_loss.default", "aten.where.self"),
    (MaxValues(), (torch.randn(6, 5),), "aten.max.dim", "aten.amax.default"),
    (GlobalAverage(), (torch.randn(2, 3, 5, 7),), "aten.adaptive_avg_pool2d.default", "aten.mean.dim"),
    (Aliases(), (torch.randn(6, 5), torch.randn(6, 5)), "aten.multiply.Tensor", "aten.mul.Tensor"),
])
def test_rewritten_program_drops_the_op_and_keeps_the_value(model, inputs, gone, added):
    ep = torch.export.export(model, inputs)
    want = model(*inputs)
    assert gone in ops_of(ep)
    replaced = decompose_listed(ep)
    assert replaced and gone not in ops_of(ep) and added in ops_of(ep)
    assert torch.allclose(ep.module()(*inputs), want)
    aliases = ("aten.multiply.", "aten.subtract.", "aten.true_divide.", "aten.clip.")
    assert not [op for op in ops_of(ep) if op.startswith(aliases)], "every alias became its op"


def test_an_adaptive_pool_to_other_sizes_stays_whole():
    """Its decomposition there is an index gather, not only a mean (data/ir/aten_ops.json "only_into")."""
    ep = torch.export.export(GlobalAverage((2, 3)), (torch.randn(2, 3, 5, 7),))
    decompose_listed(ep)
    assert "aten.adaptive_avg_pool2d.default" in ops_of(ep) and "aten.mean.dim" not in ops_of(ep)


def test_a_reduction_whose_indices_are_read_stays_whole():
    x = torch.randn(6, 5)
    ep = torch.export.export(MaxWithIndices(), (x,))
    decompose_listed(ep)
    assert "aten.max.dim" in ops_of(ep) and "aten.amax.default" not in ops_of(ep)
    assert torch.allclose(ep.module()(x), MaxWithIndices()(x))


class ConvBnReLU6Residual(torch.nn.Module):
    """An MBConv tail as torchvision and KernelBench write it: in-place ReLU6 and `x += identity`."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.act = torch.nn.ReLU6(inplace=True)

    def forward(self, x):
        y = self.act(self.bn(self.conv(x)))
        later = y * 2  # reads y after the in-place update: must see the clamped values
        y += x
        return y + later


class UpdateThroughView(torch.nn.Module):
    def forward(self, x):
        z = x * 2
        z[:, :2].relu_()  # reaches z through the view
        return z


class ViewBeforeUpdate(torch.nn.Module):
    def forward(self, x):
        z = x * 2
        v = z[:, :2]
        z.relu_()  # v sees it
        return v + 1


def test_in_place_pointwise_calls_on_intermediates_become_the_op():
    model, x = ConvBnReLU6Residual().eval(), torch.randn(2, 4, 6, 6)
    ep = torch.export.export(model, (x,))
    assert {"aten.hardtanh_.default", "aten.add_.Tensor"} <= set(ops_of(ep))
    want = model(x.clone())
    assert sorted(decompose_listed(ep)) == ["add_", "hardtanh_"]
    assert "aten.hardtanh.default" in ops_of(ep) and not any(op.endswith("_.default") or "add_" in op for op in ops_of(ep))
    assert torch.allclose(ep.module()(x.clone()), want)


@pytest.mark.parametrize("model", [UpdateThroughView(), ViewBeforeUpdate()])
def test_in_place_calls_through_or_under_views_keep_their_side_effect(model):
    x = torch.randn(3, 4)
    ep = torch.export.export(model, (x,))
    want = model(x.clone())
    assert decompose_listed(ep) == []
    assert torch.allclose(ep.module()(x.clone()), want)


class CastNorm(torch.nn.Module):
    """Hugging Face's RMSNorm of a bf16 tensor: torch.export checks each .to()'s input with
    aten._assert_tensor_metadata, a call that computes nothing but reads the norm's intermediates."""

    def forward(self, x):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)
        return 2 * h.to(x.dtype)


def test_export_metadata_checks_are_dropped_and_the_value_kept():
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    ep = torch.export.export(CastNorm(), (x,))
    assert "aten._assert_tensor_metadata.default" in ops_of(ep)
    decompose_listed(ep)
    assert "aten._assert_tensor_metadata.default" not in ops_of(ep)
    assert ops_of(ep).count("aten.to.dtype") == 2
    assert torch.equal(ep.module()(x), CastNorm()(x))
