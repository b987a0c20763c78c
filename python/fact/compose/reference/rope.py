"""CPU reference of a rotary-embedding op (rope_<id>, templates/cute/rope_op.cpp.in) with the kernel ABI's semantics
(the "abi" doc of data/families/rope.json): computed in float64, rounded once to x's dtype."""
import torch

SCHEMA = "(Tensor x, Tensor cos, Tensor sin) -> Tensor"


def _rope(x, cos, sin):
    # Half-split rotary embedding: x * cos + cat(-x[..., D/2:], x[..., :D/2]) * sin, cos/sin [T, D] or
    # [1, 1, T, D] broadcast over batch and heads.
    d = x.double()
    half = d.shape[-1] // 2
    y = d * cos.double() + torch.cat((-d[..., half:], d[..., :half]), dim=-1) * sin.double()
    # As the op: the layout PyTorch's elementwise ops give x (empty_like), rounded once.
    out = torch.empty_like(x)
    out.copy_(y)
    return out


def reference_op(entry):
    """(schema, implementation, key) of a rope op's manifest entry (one op computes every rope)."""
    return SCHEMA, _rope, "rope"
