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


class MaxWithIndices(torch.nn.Module):
    def forward(self, x):
        v, i = torch.max(x, dim=1)
        return v + i.float()


@pytest.mark.parametrize("model, inputs, gone, added", [
    (Huber(), (torch.randn(6, 5), torch.randn(6, 5)), "aten.smooth_l1_loss.default", "aten.where.self"),
    (MaxValues(), (torch.randn(6, 5),), "aten.max.dim", "aten.amax.default"),
])
def test_rewritten_program_drops_the_op_and_keeps_the_value(model, inputs, gone, added):
    ep = torch.export.export(model, inputs)
    want = model(*inputs)
    assert gone in ops_of(ep)
    replaced = decompose_listed(ep)
    assert replaced and gone not in ops_of(ep) and added in ops_of(ep)
    assert torch.allclose(ep.module()(*inputs), want)


def test_a_reduction_whose_indices_are_read_stays_whole():
    x = torch.randn(6, 5)
    ep = torch.export.export(MaxWithIndices(), (x,))
    decompose_listed(ep)
    assert "aten.max.dim" in ops_of(ep) and "aten.amax.default" not in ops_of(ep)
    assert torch.allclose(ep.module()(x), MaxWithIndices()(x))
