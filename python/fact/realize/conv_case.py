"""The conv family's measurement case: out = epilogue(conv(x, w)) for conv1d/2d/3d (stride, padding, dilation,
groups; transposed: conv_transpose with w [c, k, ...] and an output padding, groups 1) with the GEMM family's
epilogue trees (bias, per-channel vectors, scalars, a residual) over the [n, k, ...] output.

Verified against the convolution in float64 on the same rounded inputs, within verify.py's table for the mode at
K = c / groups * filter taps. fp32 tensors multiply in TF32 in the implicit GEMM (groups 1) and in fp32 in the direct
kernel (a grouped convolution, or a dense one of few channels the C++ problem marks "direct"): the baseline is PyTorch's own convolution as a module runs it, cuDNN with TF32 allowed
(PyTorch's default for convolutions, whatever the matmul precision), plus PyTorch's epilogue ops; both sides are timed from channels-first tensors as the module holds them (the op's layout change
counts toward FACT's time: the kernel transposes x (and a residual) into its workspace and writes the output
channels-first from its epilogue, the case's pre-kernel step copies the filter).
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, replace

from ..compose.reference.conv import REDUCTIONS, convolution, evaluate_conv_epilogue, reduce_output
from ..compose.reference.gemm import tree_leaves, tree_slots, vector_slots
from . import verify
from .gemm_case import parse_epilogue, epilogue_tables
from .kernel_abi import FACT_CONV_MAX_VECTORS, FactConvArgs
from .measure_case import MeasureCase
from .problem_fields import JsonProblem, ProblemError, check_keys, integer, paired_choice

SPATIAL = 3  # FACT_CONV_SPATIAL: (d, h, w), a 2-D conv's depth 1
REFERENCE_CHUNK_BYTES = 1 << 30  # float64 output of one slice of the batch in the reference
REFERENCE_F64_BYTES = 2 << 30    # a larger reference is kept in float32
TIMED_VARIANT_MAX_BYTES = 1 << 30  # an input set past this is not timed channels-last as well (a second copy)
NUMERICS_FOR_DTYPE = {"float32": "tf32", "bfloat16": "bf16", "float16": "fp16"}
# fp32 convolutions: TF32 (PyTorch's cuDNN default) or fp32-accurate 3xTF32 (against cuDNN with TF32 off).
FP32_NUMERICS = ("tf32", "3xtf32")
DIRECT_NUMERICS_FOR_DTYPE = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}  # the direct kernel: fp32 FMAs
PROBLEM_KEYS = ("spatial_dims", "n", "c", "k", "in", "filter", "out", "stride", "padding", "dilation", "transposed",
                "output_padding", "groups", "dtype", "numerics", "epilogue", "channels_last", "reduce", "reduce_over",
                "direct")


def _dims(obj, key, where, minimum):
    v = obj.get(key)
    if not isinstance(v, list) or len(v) != SPATIAL or not all(isinstance(x, int) and not isinstance(x, bool)
                                                                 and x >= minimum for x in v):
        raise ProblemError(f"{where}.{key}: {v!r} is not {SPATIAL} integers >= {minimum} (depth, height, width)")
    return tuple(v)


@dataclass(frozen=True)
class ConvProblem(JsonProblem):
    spatial_dims: int
    n: int
    c: int
    k: int
    in_: tuple
    filter: tuple
    out: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    transposed: bool
    output_padding: tuple
    groups: int
    dtype: str
    numerics: str
    epilogue: object
    # FactConvArgs::channels_last: which tensors the verification hands the kernel channels-last (bit 1 x, 2 the
    # residual, 4 out): 0 in a problem tuned on a module's channels-first tensors, channels_last_bits in one a chain
    # of convolutions feeds (the C++ problem's channels_last), the other one in verify_variants.
    channels_last: int = 0
    # The C++ problem's reduce over reduce_over: the op returns the epilogue's values reduced over each image's pixels
    # ([n, k]) or each pixel's channels ([n, 1, pixels...]); "" the output itself.
    reduce: str = ""
    reduce_over: str = ""
    # The C++ problem's dense_direct ("direct" in its JSON): a dense convolution of few channels the direct kernel takes.
    dense_direct: bool = False

    def to_json(self) -> dict:
        j = super().to_json()
        j["in"] = j.pop("in_")
        j["direct"] = j.pop("dense_direct")
        for key in ("channels_last", "reduce", "reduce_over", "direct"):
            if not j[key]:
                del j[key]
        return j

    @property
    def tree(self):
        return epilogue_tables()[0][self.epilogue] if isinstance(self.epilogue, str) else self.epilogue

    @property
    def own(self) -> slice:
        """The conv's own spatial dims among the ABI's three."""
        return slice(SPATIAL - self.spatial_dims, SPATIAL)

    @property
    def reduction(self) -> int:
        """Products summed per output: c / groups times the taps (a transposed convolution's outputs take at most
        ceil(filter / stride) taps a dim)."""
        if self.transposed:
            return self.c * math.prod(-(-f // s) for f, s in zip(self.filter, self.stride))
        return self.c // self.groups * math.prod(self.filter)

    @property
    def direct(self) -> bool:
        """A grouped convolution or a dense one marked so: the direct kernel's, which reads w as PyTorch holds it."""
        return self.groups > 1 or self.dense_direct

    @property
    def w_shape(self) -> tuple:
        """w as PyTorch holds it: [k, c / groups, ...], or [c, k, ...] transposed."""
        return ((self.c, self.k) if self.transposed else (self.k, self.c // self.groups)) + tuple(self.filter[self.own])

    @property
    def out_shape(self) -> tuple:
        """The convolution's output (and a residual's shape)."""
        return (self.n, self.k, *self.out[self.own])

    @property
    def result_shape(self) -> tuple:
        """What the op returns: the output, or what the reduction leaves of it."""
        if self.reduce_over == "pixels":
            return (self.n, self.k)
        return (self.n, 1, *self.out[self.own]) if self.reduce_over == "channels" else self.out_shape

    def reduced(self, out):
        """out [n, k, ...] reduced as the problem says (else out itself)."""
        return reduce_output(out, self.reduce, self.reduce_over)


def parse_problem(obj, where: str = "request.problem") -> ConvProblem:
    check_keys(obj, PROBLEM_KEYS, where)
    groups = integer(obj, "groups", where) if "groups" in obj else 1
    dense_direct = obj.get("direct", False)
    if not isinstance(dense_direct, bool) or (dense_direct and groups != 1):
        raise ProblemError(f"{where}.direct: {dense_direct!r} is not true or false (true: a dense convolution, groups 1, "
                           "the direct kernel takes)")
    if groups > 1 or dense_direct:
        dtype, numerics = paired_choice(obj, where, "dtype", DIRECT_NUMERICS_FOR_DTYPE, "numerics",
                                        "the direct kernel (grouped convolutions, dense ones marked direct) runs fp32 "
                                        "FMAs")
    elif obj.get("dtype") == "float32" and obj.get("numerics") in FP32_NUMERICS:
        dtype, numerics = "float32", obj["numerics"]
    else:
        dtype, numerics = paired_choice(obj, where, "dtype", NUMERICS_FOR_DTYPE, "numerics",
                                        "fp32 convolutions run TF32, as PyTorch's cuDNN default, or 3xtf32")
    dims = integer(obj, "spatial_dims", where)
    if dims > SPATIAL:
        raise ProblemError(f"{where}.spatial_dims: {dims} is over {SPATIAL}")
    transposed = obj.get("transposed", False)
    if not isinstance(transposed, bool):
        raise ProblemError(f"{where}.transposed: {transposed!r} is not true or false")
    p = ConvProblem(spatial_dims=dims, n=integer(obj, "n", where), c=integer(obj, "c", where),
                    k=integer(obj, "k", where), in_=_dims(obj, "in", where, 1), filter=_dims(obj, "filter", where, 1),
                    out=_dims(obj, "out", where, 1), stride=_dims(obj, "stride", where, 1),
                    padding=_dims(obj, "padding", where, 0), dilation=_dims(obj, "dilation", where, 1),
                    transposed=transposed,
                    output_padding=_dims(obj, "output_padding", where, 0) if "output_padding" in obj else (0, 0, 0),
                    groups=groups, dtype=dtype, numerics=numerics, dense_direct=dense_direct,
                    epilogue=parse_epilogue(obj.get("epilogue", "none"), f"{where}.epilogue"))
    for i in range(SPATIAL):
        if p.transposed:
            want = ((p.in_[i] - 1) * p.stride[i] - 2 * p.padding[i] + p.dilation[i] * (p.filter[i] - 1)
                    + p.output_padding[i] + 1)
        else:
            want = (p.in_[i] + 2 * p.padding[i] - p.dilation[i] * (p.filter[i] - 1) - 1) // p.stride[i] + 1
            if p.output_padding[i]:
                raise ProblemError(f"{where}.output_padding: {list(p.output_padding)} on a forward convolution")
        if p.out[i] != want:
            raise ProblemError(f"{where}.out: {list(p.out)} does not follow from the input, filter, stride, padding "
                               f"and dilation (dim {i}: {want})")
    if p.c % p.groups or p.k % p.groups or (p.direct and p.transposed):
        raise ProblemError(f"{where}.groups: {p.groups} must divide c {p.c} and k {p.k} (the direct kernel's: forward "
                           "convolutions only)")
    if "C" in tree_leaves(p.tree) or "col" in tree_slots(p.tree).values():
        raise ProblemError(f"{where}.epilogue: a convolution's epilogue reads no C and no column vectors")
    if p.transposed and "residual" in tree_leaves(p.tree):
        raise ProblemError(f"{where}.epilogue: a transposed convolution's epilogue reads no residual")
    reduce, over = obj.get("reduce", ""), obj.get("reduce_over", "")
    if (reduce or over) and (reduce not in REDUCTIONS.get(over, ()) or p.dtype != "float32" or p.direct):
        raise ProblemError(f"{where}.reduce: {reduce!r} over {over!r} is not one of {REDUCTIONS} over an fp32 "
                           "convolution of groups 1")
    p = replace(p, reduce=reduce, reduce_over=over)
    # The C++ problem's channels_last (true: tuned as a chain of convolutions hands it over) becomes the layout bits;
    # the bits themselves (a variant's to_json) are taken as they are.
    layout = obj.get("channels_last", False)
    if isinstance(layout, bool):
        layout = channels_last_bits(p) if layout else 0
    elif not isinstance(layout, int) or not 0 <= layout <= 7:
        raise ProblemError(f"{where}.channels_last: {layout!r} is not true, false or FactConvArgs bits 0-7")
    return replace(p, channels_last=layout)


def channels_last_bits(p: ConvProblem) -> int:
    """FactConvArgs::channels_last as a chain of convolutions hands a kernel its tensors: x (an implicit GEMM's where
    its channels are whole 16-byte vectors, TMA's unit; else the kernel pads its own copy), the residual, the
    output."""
    vector = 16 // verify.torch_dtype(p.dtype).itemsize
    return (1 if p.direct or p.c % vector == 0 else 0) | (2 if "residual" in tree_leaves(p.tree) else 0) | 4


@dataclass
class ConvInputs:
    x: object          # [n, c, ...] channels-first, dense: as a module holds it (and as the kernel reads it)
    w: object          # [k, c / groups, ...] likewise ([c, k, ...] transposed)
    w_last: object     # the kernel's filter: w's values in channels-last storage, filled by the pre-kernel copy
                       # (transposed or direct: w itself, which the kernel reads as PyTorch holds it)
    bias: object       # [k] or None
    residual: object   # like the output, channels-first, or None
    vectors: dict      # {"vec<i>": flat [k] or [1]}
    outputs: dict      # {"out": (the channels-first output, guarded flat buffer)}


def channels_last_copy(t):
    """t's values in dense channels-last storage ([n, ..., c] in memory), viewed as [n, c, ...]."""
    last = (0, *range(2, t.dim()), 1)
    return t.permute(last).contiguous().permute(0, t.dim() - 1, *range(1, t.dim() - 1))


def filter_storage(p: ConvProblem, w):
    """The kernel's filter: w's values (NaN until the pre-kernel copy) as the logical [k, c, ...] view of channels-last
    storage [k, ..., cw] whose channels past c are zero (cw: c in whole 16-byte vectors, TMA's unit, as the op
    wrapper pads it)."""
    import torch
    vector = 16 // w.element_size()
    cw = -(-p.c // vector) * vector
    store = torch.zeros(p.k, *w.shape[2:], cw, device=w.device, dtype=w.dtype)
    store[..., :p.c] = float("nan")
    return store[..., :p.c].permute(0, w.dim() - 1, *range(1, w.dim() - 1))


class ConvCase(MeasureCase):
    family = "conv"
    args_type = FactConvArgs
    has_workspace = True

    def tolerance(self) -> float:
        return verify.tolerance(self.problem.numerics, self.problem.reduction)

    def tolerance_table(self) -> dict:
        return verify.tolerance_table(self.problem.reduction)

    def bytes_per_set(self) -> int:
        p = self.problem
        elem = {"float32": 4, "bfloat16": 2, "float16": 2}[p.dtype]
        x = p.n * p.c * math.prod(p.in_)
        w = math.prod(p.w_shape) * (1 if p.transposed or p.direct else 2)  # an implicit GEMM's filter: both layouts
        out = p.n * p.k * math.prod(p.out)
        residual = out if "residual" in tree_leaves(p.tree) else 0
        out = math.prod(p.result_shape)
        return (x + w + out + residual + (len(vector_slots(p.tree)) + 1) * p.k) * elem

    def make_inputs(self, device, generator=None) -> ConvInputs:
        """Fresh random operands: x ~ N(0, 1), w scaled by 1/sqrt(K) so outputs are about N(0, 1)."""
        import torch
        p = self.problem
        dt = verify.torch_dtype(p.dtype)
        own = p.own

        def randn(*shape, scale=1.0):
            return (torch.randn(*shape, device=device, dtype=torch.float32, generator=generator) * scale).to(dt)

        x = randn(p.n, p.c, *p.in_[own])
        w = w_dense = randn(*p.w_shape, scale=1.0 / math.sqrt(p.reduction))
        if p.channels_last & 1:
            x = channels_last_copy(x)
            if not p.transposed:  # a channels-last module's filters are too (cuDNN's call reads them so)
                w = channels_last_copy(w)
        # A transposed or direct kernel reads w dense, as its op wrapper hands it.
        w_last = w_dense if p.transposed or p.direct else filter_storage(p, w)
        slots = tree_slots(p.tree)
        bias = randn(p.k, scale=0.5) if "bias" in slots else None
        residual = randn(*p.out_shape) if "residual" in tree_leaves(p.tree) else None
        if residual is not None and p.channels_last & 2:
            residual = channels_last_copy(residual)
        vectors = {slot: (torch.rand(p.k if slots[slot] == "row" else 1, device=device, dtype=torch.float32,
                                     generator=generator) + 0.5).to(dt) for slot in vector_slots(p.tree)}
        numel = math.prod(p.result_shape)
        g = verify.GUARD_ELEMENTS
        buf = torch.full((numel + 2 * g,), float("nan"), device=device, dtype=dt)
        view = buf[g:g + numel].view(p.result_shape)
        if p.channels_last & 4 and not p.reduce:  # [n, ..., k] in memory
            last = (p.n, *p.out_shape[2:], p.k)
            view = buf[g:g + numel].view(last).permute(0, len(last) - 1, *range(1, len(last) - 1))
        return ConvInputs(x, w, w_last, bias, residual, vectors, {"out": (view, buf)})

    def pre_kernel(self):
        return None if self.problem.transposed or self.problem.direct else self.filter_to_channels_last

    @staticmethod
    def filter_to_channels_last(inp: ConvInputs) -> None:
        """The op's first step, timed with the kernel: the module's channels-first filter in channels-last storage
        (x is transposed by the kernel itself, in its workspace)."""
        inp.w_last.copy_(inp.w)

    def input_tensors(self, inp: ConvInputs) -> list:
        return [t for t in (inp.x, inp.w, inp.bias, inp.residual, *inp.vectors.values()) if t is not None]

    def kernel_args(self, inp: ConvInputs, stream_ptr: int) -> FactConvArgs:
        p = self.problem
        ptr = lambda t: ctypes.c_void_p(t.data_ptr()) if t is not None else None  # noqa: E731
        arr = lambda v: (ctypes.c_int64 * SPATIAL)(*v)  # noqa: E731
        slots = (ctypes.c_void_p * FACT_CONV_MAX_VECTORS)()
        for slot, t in inp.vectors.items():
            slots[int(slot[3:])] = t.data_ptr()
        return FactConvArgs(n=p.n, c=p.c, k=p.k, in_extent=arr(p.in_), filter_extent=arr(p.filter),
                            out_extent=arr(p.out), stride=arr(p.stride), padding=arr(p.padding),
                            dilation=arr(p.dilation), transposed=int(p.transposed), groups=p.groups,
                            channels_last=p.channels_last, x=ptr(inp.x), w=ptr(inp.w_last),
                            out=ptr(inp.outputs["out"][0]),
                            bias=ptr(inp.bias), residual=ptr(inp.residual), vectors=slots, alpha=1.0,
                            workspace=None, workspace_bytes=0, stream=ctypes.c_void_p(stream_ptr))

    def verify_variants(self) -> list:
        """An implicit-GEMM kernel once more in the other layout: with channels-last tensors, as a composed chain of
        convolutions hands them over (channels_last_bits), or, tuned so, with the module's channels-first ones. A
        direct kernel tuned in a chain (the element kernel, any layout) once more channels-first; one tuned
        channels-first stages channel planes, channels-first only."""
        p = self.problem
        if p.direct:
            return [replace(p, channels_last=0)] if p.channels_last else []
        return [replace(p, channels_last=0 if p.channels_last else channels_last_bits(p))]

    def timed_variants(self) -> list:
        """The other layout (verify_variants') where one of the two reads x in place: channels-last against cuDNN's
        channels-last kernel and PyTorch's epilogue ops on channels-last tensors (torch.compile's layout in a chain),
        channels-first against cuDNN on the module's tensors; not for inputs past TIMED_VARIANT_MAX_BYTES (a second
        copy of a level-1 problem's GB tensors)."""
        if self.bytes_per_set() > TIMED_VARIANT_MAX_BYTES:
            return []
        return [v for v in self.verify_variants() if (v.channels_last | self.problem.channels_last) & 1]

    def _conv(self, x, w, bias=None):
        p = self.problem
        own = p.own
        return convolution(x, w, p.stride[own], p.padding[own], p.dilation[own], p.transposed, p.output_padding[own],
                           bias, p.groups)

    def reference(self, inp: ConvInputs) -> dict:
        """The tree over the convolution in float64 on the same rounded inputs, a slice of the batch at a time (a
        level-1 problem's output is 8 GB in float32: its float64 temporaries would not fit beside the inputs); kept in
        float64 up to REFERENCE_F64_BYTES, else rounded once to float32 (verify.compare reads either)."""
        import torch
        p = self.problem
        _, activations = epilogue_tables()
        f64 = lambda t: t.double() if t is not None else None  # noqa: E731
        w, bias = inp.w.double(), f64(inp.bias)
        vectors = {s: t.double() for s, t in inp.vectors.items()}
        per_image = math.prod(p.out_shape[1:])
        dtype = torch.float64 if p.n * math.prod(p.result_shape[1:]) * 8 <= REFERENCE_F64_BYTES else torch.float32
        out = torch.empty(p.result_shape, dtype=dtype, device=inp.x.device)
        step = max(1, REFERENCE_CHUNK_BYTES // (per_image * 8))
        for start in range(0, p.n, step):
            rows = slice(start, start + step)
            acc = self._conv(inp.x[rows].double(), w)
            residual = f64(inp.residual[rows]) if inp.residual is not None else None
            out[rows] = p.reduced(evaluate_conv_epilogue(p.tree, activations, acc, bias, residual, vectors,
                                                         "the conv problem"))
        return {"out": out}

    def baselines(self) -> list:
        """PyTorch's convolution from channels-first tensors (a module's), cuDNN with TF32 allowed for fp32
        (PyTorch's default; off against 3xtf32 kernels), then PyTorch's epilogue ops; a bias the tree adds first goes
        into the conv, as nn.Conv*d passes it."""
        import torch
        p = self.problem
        tf32 = p.numerics != "3xtf32"
        _, activations = epilogue_tables()
        tree = p.tree
        # A module's conv adds its bias inside cuDNN's call: the tree's alpha * acc + bias becomes acc there.
        conv_bias = ["add", ["mul", "alpha", "acc"], {"row": "bias"}]

        def with_bias_in_conv(t):
            if t == conv_bias:
                return "acc"
            return [t[0], *[with_bias_in_conv(c) for c in t[1:]]] if isinstance(t, list) else t

        module_tree = with_bias_in_conv(tree)
        bias_in_conv = module_tree != tree

        def run(inp):
            x, w = inp.x, inp.w
            with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=False, allow_tf32=tf32):
                acc = self._conv(x, w, inp.bias if bias_in_conv else None)
            return {"out": p.reduced(evaluate_conv_epilogue(module_tree, activations, acc, inp.bias, inp.residual,
                                                            inp.vectors, "the conv problem"))}

        layout = ", channels-last" if p.channels_last & 1 else ""
        name = (f"torch conv (cuDNN{layout}, TF32 allowed: PyTorch's default)" if p.dtype == "float32" and tf32
                else f"torch conv (cuDNN{layout}, TF32 off: fp32)" if p.dtype == "float32"
                else f"torch conv (cuDNN{layout})")
        return [(name + ("" if module_tree == "acc" or tree == ["mul", "alpha", "acc"] else " + PyTorch epilogue ops"),
                 run)]


Case = ConvCase
