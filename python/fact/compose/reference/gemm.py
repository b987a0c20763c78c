"""CPU reference of a GEMM op (gemm_<id>): what the CUTLASS wrapper computes (templates/cutlass/op_wrapper_op.cpp.in),
act(a @ b + bias) + residual, with b the [K, N] operand (a Linear weight arrives as weight.t()); for bias_silu_mul
(SwiGLU) silu(a @ b + bias) * residual, the residual slot holding the up projection U. The epilogue comes from the
composed module's manifest entry."""
import math

import torch

SCHEMA = "(Tensor a, Tensor b, Tensor? bias, Tensor? residual) -> Tensor"

_ACTIVATIONS = {
    "none": lambda x: x,
    "bias": lambda x: x,
    "bias_residual": lambda x: x,
    "bias_relu": torch.relu,
    "bias_silu": torch.nn.functional.silu,
    "bias_gelu_erf": lambda x: torch.nn.functional.gelu(x),
    "bias_gelu_tanh": lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3)))),
    "bias_silu_mul": torch.nn.functional.silu,
}
# How the residual slot joins the activated GEMM: added, or multiplied (SwiGLU's U).
_MULTIPLIES_RESIDUAL = {"bias_silu_mul"}


def _gemm(epilogue):
    act = _ACTIVATIONS[epilogue]
    multiplies = epilogue in _MULTIPLIES_RESIDUAL

    def gemm(a, b, bias, residual):
        d = torch.matmul(a, b)
        if bias is not None:
            d = d + bias
        d = act(d)
        if residual is not None:
            d = d * residual.reshape(d.shape) if multiplies else d + residual.reshape(d.shape)
        elif multiplies:
            raise ValueError(f"epilogue {epilogue} multiplies by the residual slot (U), but none was passed")
        return d.contiguous()

    return gemm


def reference_op(entry):
    """(schema, implementation, key) of a GEMM op's manifest entry; the key is its epilogue."""
    epilogue = entry.get("epilogue") or "none"
    if epilogue not in _ACTIVATIONS:
        raise ValueError(f"op {entry['op']}: epilogue '{epilogue}' has no reference implementation; "
                         f"known: {sorted(_ACTIVATIONS)}")
    return SCHEMA, _gemm(epilogue), f"gemm epilogue {epilogue}"
