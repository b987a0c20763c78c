"""CPU reference implementations of the torch.ops.fact ops, so a composed module runs without a GPU.

GEMM ops (gemm_<id>) compute what the CUTLASS wrapper computes (templates/cutlass/op_wrapper_op.cpp.in):
act(a @ b + bias) + residual, with b the [K, N] operand (a Linear weight arrives as weight.t());
for bias_silu_mul (SwiGLU) silu(a @ b + bias) * residual, the residual slot holding the up projection U.
The epilogue of each op comes from the composed module's manifest.json.
Normalization ops (norm_<id>, templates/cute/norm_op.cpp.in), attention ops (attn_<id>,
templates/cute/attention_op.cpp.in) and rotary-embedding ops (rope_<id>, templates/cute/rope_op.cpp.in) are
computed in float64 and rounded once to the input's dtype, with the kernel ABI's semantics
(src/realize/kernel_abi.h); a norm's kind comes from the manifest entry's config.
Row-wise ops (rowwise_<id>, templates/rowwise/rowwise_op.cpp.in) replay the registered fragment carried in
the entry's config with PyTorch's ops in float64, rounded once to the inputs' dtype.
"""
import json
import math
from pathlib import Path

import torch

SCHEMA = "(Tensor a, Tensor b, Tensor? bias, Tensor? residual) -> Tensor"
NORM_SCHEMA = "(Tensor x, Tensor? residual, Tensor? weight, Tensor? bias, float eps) -> {}"
ATTENTION_SCHEMA = "(Tensor q, Tensor k, Tensor v, float scale, bool causal) -> Tensor"
ROPE_SCHEMA = "(Tensor x, Tensor cos, Tensor sin) -> Tensor"

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


def _norm_reference(kind, store_sum):
    if kind not in ("layer_norm", "rms_norm"):
        raise ValueError(f"normalization kind '{kind}' has no reference implementation; known: layer_norm, rms_norm")

    def norm(x, residual, weight, bias, eps):
        # s = x + residual rounded to x's dtype (as PyTorch's add, and the kernel), then normalized in float64.
        s = x if residual is None else x + residual
        d = s.double()
        if kind == "layer_norm":
            y = (d - d.mean(-1, keepdim=True)) * torch.rsqrt(d.var(-1, unbiased=False, keepdim=True) + eps)
        else:
            y = d * torch.rsqrt(d.pow(2).mean(-1, keepdim=True) + eps)
        if weight is not None:
            y = y * weight.double()
        if bias is not None:
            y = y + bias.double()
        y = y.to(x.dtype)
        return (y, s.contiguous()) if store_sum else y

    return norm


def _attention(q, k, v, scale, causal):
    # Grouped-query attention: K/V head j serves query heads j * group ... (j + 1) * group - 1.
    group = q.shape[1] // k.shape[1]
    kd, vd = (t.double().repeat_interleave(group, dim=1) for t in (k, v))
    s = torch.matmul(q.double(), kd.transpose(-2, -1)) * scale
    if causal:  # bottom-right aligned, as the kernel: key j is masked for query i when j > i + (seq_k - seq_q)
        seq_q, seq_k = q.shape[2], k.shape[2]
        i = torch.arange(seq_q).unsqueeze(1)
        j = torch.arange(seq_k).unsqueeze(0)
        s = s.masked_fill(j > i + (seq_k - seq_q), float("-inf"))
    o = torch.matmul(torch.softmax(s, dim=-1), vd).to(q.dtype)
    # As the op: the [B, H, T, D] view of a [B, T, H, D] tensor.
    return o.transpose(1, 2).contiguous().transpose(1, 2)


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


def _rowwise_reference(fragment):
    from fact.agent.fragment_replay import replay
    broadcast = [bool(s.get("broadcast", False)) for s in fragment["inputs"]]

    def rowwise(*inputs):
        if len(inputs) != len(broadcast):
            raise ValueError(f"row-wise op takes {len(broadcast)} inputs, got {len(inputs)}")
        full = next(t for t, b in zip(inputs, broadcast) if not b)
        y = replay(fragment, [t.double() for t in inputs])
        # As the op: a contiguous tensor shaped like the first full input.
        return y.reshape(full.shape).to(full.dtype).contiguous()

    return rowwise


def _family_reference(entry):
    """(schema, implementation, key) of a normalization, attention or rope op's manifest entry."""
    family, config = entry["family"], entry.get("config") or {}
    if family == "normalization":
        kind, store_sum = config.get("kind"), bool(config.get("store_sum", False))
        return (NORM_SCHEMA.format("(Tensor, Tensor)" if store_sum else "Tensor"), _norm_reference(kind, store_sum),
                f"normalization {kind}{' +sum' if store_sum else ''}")
    if family == "attention":
        return ATTENTION_SCHEMA, _attention, "attention"
    if family == "rope":
        return ROPE_SCHEMA, _rope, "rope"
    if family == "rowwise":
        fragment = config.get("fragment")
        if not isinstance(fragment, dict) or not fragment.get("inputs"):
            raise ValueError(f"op {entry['op']}: the rowwise config carries no fragment to replay")
        params = ", ".join(f"Tensor in{i}" for i in range(len(fragment["inputs"])))
        return (f"({params}) -> Tensor", _rowwise_reference(fragment),
                f"rowwise {config.get('entry')} {config.get('source_hash')}")
    raise ValueError(f"op {entry['op']}: family '{family}' has no reference implementation; "
                     f"known: gemm, normalization, attention, rope, rowwise")


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
        name = entry["op"]
        if entry.get("family", "gemm") != "gemm":
            schema, impl, key = _family_reference(entry)
            if name in _registered:
                if _registered[name] != key:
                    raise ValueError(f"op {name} is already registered as '{_registered[name]}', not '{key}'")
                names.append(name)
                continue
            lib = torch.library.Library("fact", "FRAGMENT")
            lib.define(name + schema)
            lib.impl(name, impl, "CPU")
            _libraries.append(lib)
            _registered[name] = key
            names.append(name)
            continue
        epilogue = entry.get("epilogue") or "none"
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
