"""CPU reference of a normalization op (norm_<id>, templates/cute/norm_op.cpp.in) with the kernel ABI's semantics
(the "abi" doc of data/families/normalization.json): LayerNorm or RMSNorm of x (+ residual) in float64, rounded
once to x's dtype; the kind and whether the sum is returned too come from the manifest entry's config."""
import torch

SCHEMA = "(Tensor x, Tensor? residual, Tensor? weight, Tensor? bias, float eps) -> {}"


def _norm(kind, store_sum):
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


def reference_op(entry):
    """(schema, implementation, key) of a normalization op's manifest entry."""
    config = entry.get("config") or {}
    kind, store_sum = config.get("kind"), bool(config.get("store_sum", False))
    if kind not in ("layer_norm", "rms_norm"):
        raise ValueError(f"op {entry['op']}: normalization kind '{kind}' has no reference implementation; "
                         f"known: layer_norm, rms_norm")
    return (SCHEMA.format("(Tensor, Tensor)" if store_sum else "Tensor"), _norm(kind, store_sum),
            f"normalization {kind}{' +sum' if store_sum else ''}")
