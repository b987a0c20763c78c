"""The rope family's measurement case: out = x * cos + rotate_half(x) * sin (half-split rotary embedding)
with x read in place through the module's view strides (e.g. q = proj(h).view(B, T, H, D).transpose(1, 2)),
cos/sin tables broadcast over batch and heads (stride 0), and out written in the layout the op allocates
(x's dim order, dense; the problem's out_strides).

Verified against the module's expression in float64 at the problem's shape and at odd sequence lengths
(1, 77, 333: a decode step and lengths that are no multiple of any CTA's rows), with the views built the
same way. cos/sin come from random angles, a different angle in each half, so a kernel that reads the
wrong half of a table is caught (the module's tables repeat the same angles in both halves).
Baseline: PyTorch eager running the module's expression (mul, slice, neg, cat, mul, add) in the same dtype.
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, replace

from . import verify
from .attention_case import restride
from .kernel_abi import FactRopeArgs
from .measure_case import MeasureCase
from .problem_fields import JsonProblem, ProblemError, bhr_strides, check_keys, integer, paired_choice

NUMERICS_FOR_DTYPE = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
PROBLEM_KEYS = ("batch", "heads", "seq", "head_dim", "x_strides", "cos_strides", "sin_strides", "out_strides",
                "dtype", "numerics")
# Relative Frobenius error and max|err|/max|ref| vs float64 on the same rounded inputs. Each output element
# is one fmaf(a, c, -(b * s)) (or + a * s) with c^2 + s^2 = 1: its error is at most u * (|b s| + |out|),
# u = 2^-24, and the rotation keeps the norm of each (x_lo, x_hi) pair, so it is below 2u * ||pair||. Hence
# rel err and max|err|/max|ref| are both at most 2 * sqrt(2) * u = 1.7e-7.
#   fp32 1e-6: about 6x over that bound; computing inside in bf16 or fp16 (4e-3, 5e-4) fails it.
#   bf16 1e-2 / fp16 5e-3: one rounding of the output to 8 / 11 bits (2e-3 / 2.4e-4 at most per element),
#   as the other families; a dropped sign or a swapped half errs by O(1).
TOLERANCE = {"fp32": 1e-6, "bf16": 1e-2, "fp16": 5e-3}
ODD_SEQ = (1, 77, 333)  # verified besides the problem's own length


@dataclass(frozen=True)
class RopeProblem(JsonProblem):
    batch: int
    heads: int
    seq: int
    head_dim: int
    x_strides: tuple     # element strides of [batch, heads, seq, head_dim] for batch, head, row
    cos_strides: tuple   # 0 where the table broadcasts (batch and head of a [seq, head_dim] table)
    sin_strides: tuple
    out_strides: tuple
    dtype: str
    numerics: str


def parse_problem(obj, where: str = "request.problem") -> RopeProblem:
    check_keys(obj, PROBLEM_KEYS, where)
    dtype, numerics = paired_choice(obj, where, "dtype", NUMERICS_FOR_DTYPE, "numerics",
                                    "rope computes in fp32 and rounds once")
    ints = {k: integer(obj, k, where) for k in ("batch", "heads", "seq", "head_dim")}
    views = {k: bhr_strides(obj, k, where) for k in ("x_strides", "cos_strides", "sin_strides", "out_strides")}
    p = RopeProblem(**ints, **views, dtype=dtype, numerics=numerics)
    if p.head_dim % 2:
        raise ProblemError(f"{where}.head_dim: {p.head_dim} is odd; rotate_half splits it in two halves")
    return p


def rotate_half(x):
    """The module's rotate_half, half-split form: cat(-x[..., D/2:], x[..., :D/2])."""
    import torch
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


@dataclass
class RopeInputs:
    x: object        # [B, H, T, D] strided view
    cos: object      # [B, H, T, D] view, stride 0 where the table broadcasts
    sin: object
    outputs: dict    # {"out": ([B, H, T, D] view with the problem's out strides, guarded flat buffer)}


class RopeCase(MeasureCase):
    family = "rope"
    args_type = FactRopeArgs

    def tolerance(self) -> float:
        return TOLERANCE[self.problem.numerics]

    def _extents(self) -> tuple:
        p = self.problem
        return p.batch, p.heads, p.seq

    def _storage_elems(self, strides: tuple) -> int:
        return 1 + sum((e - 1) * s for e, s in zip(self._extents(), strides)) + self.problem.head_dim - 1

    def bytes_per_set(self) -> int:
        p = self.problem
        elem = {"float32": 4, "bfloat16": 2, "float16": 2}[p.dtype]
        n = sum(self._storage_elems(s) for s in (p.x_strides, p.cos_strides, p.sin_strides, p.out_strides))
        return n * elem

    def make_inputs(self, device, generator=None) -> RopeInputs:
        import torch
        p = self.problem
        dt = verify.torch_dtype(p.dtype)
        shape = self._extents() + (p.head_dim,)

        def view(storage, strides):
            return torch.as_strided(storage, shape, tuple(strides) + (1,))

        x = view(torch.randn(self._storage_elems(p.x_strides), device=device, generator=generator).to(dt), p.x_strides)
        # Angles in fp32 as the module computes its tables; cos and sin of one angle when they share a layout.
        theta = (torch.rand(self._storage_elems(p.cos_strides), device=device, generator=generator) * 2 - 1) * math.pi
        cos = view(theta.cos().to(dt), p.cos_strides)
        if p.sin_strides != p.cos_strides:
            theta = (torch.rand(self._storage_elems(p.sin_strides), device=device, generator=generator) * 2 - 1) * math.pi
        sin = view(theta.sin().to(dt), p.sin_strides)
        g, n = verify.GUARD_ELEMENTS, self._storage_elems(p.out_strides)
        buf = torch.full((n + 2 * g,), float("nan"), device=device, dtype=dt)
        out = view(buf[g:g + n], p.out_strides)
        return RopeInputs(x, cos, sin, {"out": (out, buf)})

    def input_tensors(self, inp: RopeInputs) -> list:
        return [inp.x, inp.cos, inp.sin]

    def kernel_args(self, inp: RopeInputs, stream_ptr: int) -> FactRopeArgs:
        p = self.problem
        out = inp.outputs["out"][0]
        (xb, xh, xt), (cb, ch, ct), (sb, sh, st), (ob, oh, ot) = (p.x_strides, p.cos_strides, p.sin_strides,
                                                                  p.out_strides)
        ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
        return FactRopeArgs(
            batch=p.batch, heads=p.heads, seq=p.seq, head_dim=p.head_dim,
            x=ptr(inp.x), x_batch_stride=xb, x_head_stride=xh, x_row_stride=xt,
            cos=ptr(inp.cos), cos_batch_stride=cb, cos_head_stride=ch, cos_row_stride=ct,
            sin=ptr(inp.sin), sin_batch_stride=sb, sin_head_stride=sh, sin_row_stride=st,
            out=ptr(out), out_batch_stride=ob, out_head_stride=oh, out_row_stride=ot,
            stream=ctypes.c_void_p(stream_ptr))

    def reference(self, inp: RopeInputs) -> dict:
        """The matched subgraph in float64 on the same (rounded) inputs."""
        x = inp.x.double()
        return {"out": x * inp.cos.double() + rotate_half(x) * inp.sin.double()}

    def _tables(self, inp: RopeInputs):
        """cos/sin as the module holds them: [seq, D] when they broadcast over batch and heads."""
        p = self.problem
        if p.cos_strides[:2] == (0, 0) and p.sin_strides[:2] == (0, 0):
            return inp.cos[0, 0], inp.sin[0, 0]
        return inp.cos, inp.sin

    def baselines(self) -> list:
        def eager(inp):
            cos, sin = self._tables(inp)
            return {"out": inp.x * cos + rotate_half(inp.x) * sin}
        return [("torch eager x*cos + rotate_half(x)*sin (mul, slice, neg, cat, mul, add)", eager)]

    def verify_variants(self) -> list:
        """The problem at odd sequence lengths, batch at most 2, every view built as the module builds it."""
        p = self.problem
        out = []
        for seq in ODD_SEQ:
            if seq == p.seq:
                continue
            b = min(p.batch, 2)
            old, new = (p.batch, p.heads, p.seq), (b, p.heads, seq)

            def again(strides):
                # A broadcast table keeps its strides (its row stride is the table's, whatever the length).
                return strides if strides[:2] == (0, 0) else restride(strides, old, new)

            out.append(replace(p, batch=b, seq=seq, x_strides=again(p.x_strides), cos_strides=again(p.cos_strides),
                               sin_strides=again(p.sin_strides), out_strides=again(p.out_strides)))
        return out


Case = RopeCase
