"""CPU reference implementations of torch.ops.fact.gemm_<id>, so a composed module runs without a GPU.

Each op computes what the CUTLASS wrapper computes (templates/cutlass/op_wrapper_op.cpp.in):
act(a @ b + bias) + residual, with b the [K, N] operand (a Linear weight arrives as weight.t());
for bias_silu_mul (SwiGLU) silu(a @ b + bias) * residual, the residual slot holding the up projection U.
The epilogue of each op comes from the composed module's manifest.json.
"""
import json
import math
from pathlib import Path

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

_libraries = []      # torch.library.Library objects must stay alive for their registrations to hold
_registered = {}     # op name -> epilogue


def _reference(epilogue):
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


def register_reference_ops(manifest):
    """Registers a CPU kernel for every accepted op of a composed module's manifest (a path or the loaded
    dict). Returns the op names. Raises ValueError naming the op when an epilogue is unknown or when the
    same op was registered earlier with another epilogue."""
    if not isinstance(manifest, dict):
        path = Path(manifest)
        manifest = json.loads(path.read_text())
    if manifest.get("format") != "fact-composed-module":
        raise ValueError("not a composed-module manifest (format 'fact-composed-module'); pass DIR/manifest.json "
                         "written by `fact compose`")
    names = []
    for entry in manifest.get("accepted", []):
        name, epilogue = entry["op"], entry.get("epilogue") or "none"
        if epilogue not in _ACTIVATIONS:
            raise ValueError(f"op {name}: epilogue '{epilogue}' has no reference implementation; "
                             f"known: {sorted(_ACTIVATIONS)}")
        if name in _registered:
            if _registered[name] != epilogue:
                raise ValueError(f"op {name} is already registered with epilogue '{_registered[name]}', "
                                 f"not '{epilogue}'; compose modules of one tuning database together")
            names.append(name)
            continue
        lib = torch.library.Library("fact", "FRAGMENT")
        lib.define(name + SCHEMA)
        lib.impl(name, _reference(epilogue), "CPU")
        _libraries.append(lib)
        _registered[name] = epilogue
        names.append(name)
    return names
