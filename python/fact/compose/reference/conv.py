"""CPU reference of a convolution op (conv_<id>, templates/cutlass/conv_op.cpp.in): the op's epilogue tree over
acc = conv(x, w) (cross-correlation, the op's stride / padding / dilation / groups; with transposed, PyTorch's
conv_transpose with w [c, k, ...] and the op's output_padding), with "bias" the op's [k] bias,
"residual" its residual slot and vec<i> its `vectors` ([k] per-channel, or one element), computed in float64 and
rounded once to x's dtype, in the memory order the op writes (channels-last where the composer asked for it, so the
PyTorch ops after it run on what they get on the GPU); a reducing op's (config "reduce" over "reduce_over") reduced
over each image's pixels ([n, k]) or each pixel's channels ([n, 1, ...]).
The tree comes from the manifest entry's config ("epilogue"), read with the GEMM reference's evaluator (gemm.py
beside this file, found by path: composed folders carry no fact package)."""
import importlib.util
from pathlib import Path

import torch.nn.functional as F

SCHEMA = ("(Tensor x, Tensor w, Tensor? bias, Tensor? residual, int[] stride, int[] padding, int[] dilation, "
          "bool transposed, int[] output_padding, int groups, Tensor[] vectors, *, bool w_constant=False, "
          "bool channels_last=False) -> Tensor")
# A reducing conv's reduce over reduce_over (the C++ ConvProblem's): each image's pixels per channel ([n, k]) or
# each pixel's channels ([n, 1, pixels...]).
REDUCTIONS = {"pixels": ("sum", "mean"), "channels": ("sum", "mean", "max", "min")}


def reduce_output(out, reduce: str, over: str):
    """out [n, k, ...] reduced over its pixels (sum / mean: [n, k]) or its channels (sum / mean / max / min:
    [n, 1, ...]), as a reducing conv op returns it; out itself without a reduction."""
    if not reduce:
        return out
    if over == "pixels":
        dims = tuple(range(2, out.dim()))
        return out.sum(dim=dims) if reduce == "sum" else out.mean(dim=dims)
    return {"sum": out.sum, "mean": out.mean, "max": out.amax, "min": out.amin}[reduce](dim=1, keepdim=True)


def convolution(x, w, stride, padding, dilation, transposed=False, output_padding=None, bias=None, groups=1):
    """conv<n>d(x, w, bias, groups=groups) or, transposed, conv_transpose<n>d(x, w, bias) (w [c, k, ...])."""
    if transposed:
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[x.dim() - 3]
        return fn(x, w, bias, stride=list(stride), padding=list(padding), output_padding=list(output_padding),
                  groups=groups, dilation=list(dilation))
    fn = (F.conv1d, F.conv2d, F.conv3d)[x.dim() - 3]
    return fn(x, w, bias, stride=list(stride), padding=list(padding), dilation=list(dilation), groups=groups)


def _gemm_reference():
    spec = importlib.util.spec_from_file_location("fact_reference_gemm_for_conv", Path(__file__).with_name("gemm.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_GEMM = _gemm_reference()


def evaluate_conv_epilogue(tree, activations, acc, bias, residual, vectors, what):
    """The tree over a channels-first convolution output acc [n, k, ...]: the bias and per-channel vectors broadcast
    along dim 1, one-element vectors as scalars, the residual shaped like acc (alpha 1, no C)."""
    row_shape = (-1,) + (1,) * (acc.dim() - 2)
    leaf = _GEMM.epilogue_leaves(acc, bias, residual, what, vectors, row_shape=row_shape)
    return _GEMM.evaluate_epilogue(tree, activations, leaf)


def _conv(tree, activations, key, reduce="", over=""):
    slots = _GEMM.vector_slots(tree)

    def conv(x, w, bias, residual, stride, padding, dilation, transposed, output_padding, groups, vectors=(),
             w_constant=False, channels_last=False):
        # w_constant is the kernel op's speed hint (a kept filter copy); channels_last orders the result's memory.
        if len(vectors) != len(slots):
            raise ValueError(f"{key} reads {len(slots)} vectors ({', '.join(slots) or 'none'}), got {len(vectors)}")
        acc = convolution(x.double(), w.double(), stride, padding, dilation, transposed, output_padding, groups=groups)
        f64 = lambda t: t.double() if t is not None else None  # noqa: E731
        out = evaluate_conv_epilogue(tree, activations, acc, f64(bias), f64(residual),
                                     {s: v.double() for s, v in zip(slots, vectors)}, key)
        if reduce:  # the op's [n, k] (each image's pixels reduced) or [n, 1, ...] (each pixel's channels)
            return reduce_output(out, reduce, over).to(x.dtype).contiguous()
        out = out.to(x.dtype)
        if channels_last:  # channels innermost: [n, c, *spatial] stored as [n, *spatial, c]
            last = [0, *range(2, out.dim()), 1]
            return out.permute(last).contiguous().permute([last.index(d) for d in range(out.dim())])
        return out.contiguous()

    return conv


def reference_op(entry):
    """(schema, implementation, key) of a conv op's manifest entry; the key is its epilogue."""
    epilogue = (entry.get("config") or {}).get("epilogue", "none")
    named, activations = _GEMM.load_epilogue_tables()
    tree = named.get(epilogue) if isinstance(epilogue, str) else epilogue
    if tree is None:
        raise ValueError(f"op {entry['op']}: epilogue '{epilogue}' has no reference implementation")
    try:
        _GEMM.check_tree(tree, activations)
    except ValueError as e:
        raise ValueError(f"op {entry['op']}: epilogue {tree!r}: {e}") from None
    reduce = (entry.get("config") or {}).get("reduce", "")
    over = (entry.get("config") or {}).get("reduce_over", "")
    if (reduce or over) and reduce not in REDUCTIONS.get(over, ()):
        raise ValueError(f"op {entry['op']}: reduce {reduce!r} over {over!r} is not a sum or mean over pixels or a sum, "
                         "mean, max or min over channels")
    key = f"conv epilogue {_GEMM.tree_text(tree)}" + (f" -> {reduce} over {over}" if reduce else "")
    return SCHEMA, _conv(tree, activations, key, reduce, over), key
