"""The normalization family's measurement case: LayerNorm / RMSNorm over the last dim, optionally
after a residual add (y = norm(x + r), and x + r itself when the graph reads it), with x and the
residual read through their row strides. Verified against the norm in float64 at the problem's rows and
at an odd row count; baseline: PyTorch's ways of computing the same in the same dtype (the fastest wins).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, replace

from . import verify
from .kernel_abi import FactNormArgs
from .measure_case import MeasureCase
from .problem_fields import JsonProblem, ProblemError, check_keys, flag, integer, paired_choice

KINDS = ("layer_norm", "rms_norm")
ODD_ROWS = 37  # verify variant: not a multiple of any rows_per_cta (1, 2, 4, 8)
NUMERICS_FOR_DTYPE = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
PROBLEM_KEYS = ("kind", "rows", "cols", "x_row_stride", "residual_row_stride", "has_weight", "has_bias",
                "has_residual", "store_sum", "eps", "dtype", "numerics")


@dataclass(frozen=True)
class NormProblem(JsonProblem):
    kind: str
    rows: int
    cols: int
    x_row_stride: int
    residual_row_stride: int
    has_weight: bool
    has_bias: bool
    has_residual: bool
    store_sum: bool
    eps: float
    dtype: str
    numerics: str


def parse_problem(obj, where: str = "request.problem") -> NormProblem:
    check_keys(obj, PROBLEM_KEYS, where)
    kind = obj.get("kind")
    if kind not in KINDS:
        raise ProblemError(f"{where}.kind: {kind!r} is not one of {', '.join(KINDS)}")
    dtype, numerics = paired_choice(obj, where, "dtype", NUMERICS_FOR_DTYPE, "numerics", "norms accumulate in fp32")
    cols = integer(obj, "cols", where)
    eps = obj.get("eps")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps < 0:
        raise ProblemError(f"{where}.eps: {eps!r} is not a number >= 0")
    flags = {k: flag(obj, k, where) for k in ("has_weight", "has_bias", "has_residual", "store_sum")}
    p = NormProblem(kind=kind, rows=integer(obj, "rows", where), cols=cols,
                    x_row_stride=integer(obj, "x_row_stride", where, default=cols, minimum=cols),
                    residual_row_stride=integer(obj, "residual_row_stride", where, default=cols, minimum=0),
                    **flags, eps=float(eps), dtype=dtype, numerics=numerics)
    if p.has_residual and p.residual_row_stride < cols:
        raise ProblemError(f"{where}.residual_row_stride: {p.residual_row_stride} is below cols {cols}")
    if p.store_sum and not p.has_residual:
        raise ProblemError(f"{where}.store_sum: needs has_residual (the sum is x + residual)")
    if p.kind == "rms_norm" and p.has_bias:
        raise ProblemError(f"{where}.has_bias: RMSNorm takes no bias")
    return p


@dataclass
class NormInputs:
    x: object            # [rows, cols] view with the problem's row stride
    residual: object     # like x, or None
    weight: object       # [cols] or None
    bias: object         # [cols] or None
    outputs: dict        # name -> (view [rows, cols], guarded flat buffer)


class NormCase(MeasureCase):
    family = "normalization"
    args_type = FactNormArgs

    def tolerance(self) -> float:
        # A row reduction of `cols` fp32 terms, then one rounding to the element type: the GEMM table
        # with K = cols (fp32 1e-5 + growth, bf16 1e-2, fp16 5e-3) bounds it with the same margins.
        return verify.tolerance(self.problem.numerics, self.problem.cols)

    def bytes_per_set(self) -> int:
        p = self.problem
        elem = {"float32": 4, "bfloat16": 2, "float16": 2}[p.dtype]
        tensors = 2 + p.has_residual + p.store_sum
        return (tensors * p.rows * p.cols + (p.has_weight + p.has_bias) * p.cols) * elem

    def make_inputs(self, device, generator=None) -> NormInputs:
        import torch
        p = self.problem
        dt = verify.torch_dtype(p.dtype)

        def randn(*shape, scale=1.0, shift=0.0):
            return (torch.randn(*shape, device=device, generator=generator) * scale + shift).to(dt)

        # An offset mean makes a one-pass E[x^2] - E[x]^2 variance visibly wrong.
        x = randn(p.rows, p.x_row_stride, scale=2.0, shift=0.5)[:, :p.cols]
        residual = randn(p.rows, p.residual_row_stride)[:, :p.cols] if p.has_residual else None
        weight = randn(p.cols, scale=0.1, shift=1.0) if p.has_weight else None
        bias = randn(p.cols, scale=0.1) if p.has_bias else None
        outputs = {"y": self._output(p, dt, device)}
        if p.store_sum:
            outputs["sum"] = self._output(p, dt, device)
        return NormInputs(x, residual, weight, bias, outputs)

    @staticmethod
    def _output(p: NormProblem, dt, device):
        import torch
        g, n = verify.GUARD_ELEMENTS, p.rows * p.cols
        buf = torch.full((n + 2 * g,), float("nan"), device=device, dtype=dt)
        return buf[g:g + n].view(p.rows, p.cols), buf

    def input_tensors(self, inp: NormInputs) -> list:
        return [t for t in (inp.x, inp.residual, inp.weight, inp.bias) if t is not None]

    def kernel_args(self, inp: NormInputs, stream_ptr: int) -> FactNormArgs:
        p = self.problem
        ptr = lambda t: ctypes.c_void_p(t.data_ptr()) if t is not None else None  # noqa: E731
        y = inp.outputs["y"][0]
        s = inp.outputs["sum"][0] if p.store_sum else None
        return FactNormArgs(rows=p.rows, cols=p.cols, x=ptr(inp.x), x_row_stride=p.x_row_stride,
                            residual=ptr(inp.residual), residual_row_stride=p.residual_row_stride if p.has_residual else 0,
                            weight=ptr(inp.weight), bias=ptr(inp.bias), y=ptr(y), y_row_stride=p.cols,
                            sum=ptr(s), sum_row_stride=p.cols if s is not None else 0, eps=p.eps,
                            stream=ctypes.c_void_p(stream_ptr))

    def reference(self, inp: NormInputs) -> dict:
        """The matched subgraph in float64 on the same (rounded) inputs."""
        import torch
        p = self.problem
        s = inp.x.double() + (inp.residual.double() if p.has_residual else 0.0)
        if p.kind == "layer_norm":
            mean = s.mean(-1, keepdim=True)
            y = (s - mean) * torch.rsqrt((s - mean).pow(2).mean(-1, keepdim=True) + p.eps)
        else:
            y = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + p.eps)
        if p.has_weight:
            y = y * inp.weight.double()
        if p.has_bias:
            y = y + inp.bias.double()
        out = {"y": y}
        if p.store_sum:
            out["sum"] = s
        return out

    def baselines(self) -> list:
        """(name, fn(inputs) -> {output name: tensor}) for each PyTorch way of doing it, in this dtype."""
        import torch
        import torch.nn.functional as F
        p = self.problem
        add = "add + " if p.has_residual else ""

        def summed(inp):
            return inp.x + inp.residual if p.has_residual else inp.x

        def wrap(fn):
            def run(inp):
                s = summed(inp)
                out = {"y": fn(s, inp)}
                if p.store_sum:
                    out["sum"] = s
                return out
            return run

        if p.kind == "layer_norm":
            return [(f"torch {add}F.layer_norm",
                     wrap(lambda s, inp: F.layer_norm(s, (p.cols,), inp.weight, inp.bias, p.eps)))]

        def written_out(s, inp):
            y = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + p.eps)
            return y * inp.weight if p.has_weight else y

        return [(f"torch {add}RMSNorm written out (pow, mean, rsqrt, mul)", wrap(written_out)),
                (f"torch {add}F.rms_norm", wrap(lambda s, inp: F.rms_norm(s, (p.cols,), inp.weight, p.eps)))]

    def verify_variants(self) -> list:
        """Extra problems verified before timing: the same rows (cols, strides, operands, sum) at an odd row
        count, so the last CTA holds fewer rows than the config's rows_per_cta (a module's 65536 or 4096 rows
        never do): rows past the end must be neither read nor written (the guards around each output)."""
        return [] if self.problem.rows == ODD_ROWS else [replace(self.problem, rows=ODD_ROWS)]


Case = NormCase
