"""Verifying a GEMM result: fresh random operands, poisoned and guarded output, float64 reference.

Per trial the operands are drawn anew (never zeros: zeros hide unwritten outputs and wrong indexing),
the output buffer is filled with NaN, including guard regions on both sides of D, and after the run:
every element of D must be written (no NaN left), nothing outside D may change, the inputs must be
unchanged, and the error against a float64 reference (same rounded inputs, the epilogue too) must be
within the numerics mode's tolerance, both as relative Frobenius error and as the largest element error
over the largest |reference| element (which catches a few wrong elements, e.g. one bad edge tile).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .measure_request import GemmProblem

# Relative tolerance by numerics mode, for the relative Frobenius error and for max|err| / max|ref|.
# The reference multiplies the same (already rounded) inputs in float64, so the error is what the
# mode adds: rounding of products/accumulation and the final rounding of D. Inputs are scaled so that
# entries of A@B are about N(0, 1).
#   fp32   : fp32 accumulation, error ~ u*sqrt(K/6) with u = 2^-24 (about 1e-6 at K=1024).
#   3xtf32 : fp32-accurate tensor-core mode; drops the small*small term, a few times fp32's error.
#   tf32   : each operand rounded to a 10-bit mantissa; about 3e-4..5e-4 relative (METHOD.md: ~3e-4).
#   bf16   : exact inputs, fp32 accumulation, D rounded to bf16 (8 bits): about 1.7e-3 (measured on
#            the H100, cuBLAS and a naive kernel alike); 1e-2 still catches dropping one k step of 1024
#            (3e-2 measured) or accumulating in bf16.
#   fp16   : D rounded to fp16 (11 bits): about 3e-4 (measured).
# Each bound has roughly 5-10x margin over the expected error of a correct kernel.
BASE_TOLERANCE = {"fp32": 1e-5, "3xtf32": 5e-5, "tf32": 5e-3, "bf16": 1e-2, "fp16": 5e-3}
# fp32 accumulation error grows like sqrt(K); this term keeps large-K problems fair (1.7e-4 at K=2^19).
ACCUMULATION_GROWTH = 4.0 * 2.0 ** -24
TOLERANCE_WHY = (
    "relative Frobenius error and max|err|/max|ref| vs a float64 reference on the same rounded inputs; "
    "bound = base[numerics] + 4*2^-24*sqrt(K); base: fp32 1e-5 (fp32 accumulation ~1e-6 at K=1024), "
    "3xtf32 5e-5 (a few times fp32), tf32 5e-3 (10-bit mantissa inputs, ~4e-4), bf16 1e-2 (bf16 output "
    "rounding ~1.7e-3), fp16 5e-3 (fp16 output rounding ~3e-4): 5-10x margin each")


def tolerance(numerics: str, k: int) -> float:
    return BASE_TOLERANCE[numerics] + ACCUMULATION_GROWTH * math.sqrt(k)


def tolerance_table(k: int) -> dict:
    return {"numerics_base": dict(BASE_TOLERANCE), "growth_per_sqrt_k": ACCUMULATION_GROWTH,
            "at_this_k": {n: tolerance(n, k) for n in BASE_TOLERANCE}, "why": TOLERANCE_WHY}


def torch_dtype(name: str):
    import torch
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


# Guard elements on each side of D: a kernel that writes past its edges is caught here.
GUARD_ELEMENTS = 4096


@dataclass
class Operands:
    """One input set laid out as the kernel sees it, plus logical [batch, M, K] / [batch, K, N] views."""
    a_storage: object   # torch.Tensor; [batch, M, K] for row, [batch, K, M] for col
    b_storage: object   # [batch, K, N] for row, [batch, N, K] for col
    a: object           # logical view [batch, M, K]
    b: object           # logical view [batch, K, N]
    bias: object        # [N] or None
    residual: object    # [batch, M, N] or None
    d_buffer: object    # flat, guard + batch*M*N + guard
    d: object           # view [batch, M, N] row-major inside d_buffer
    lda: int
    ldb: int
    # SwiGLU (bias_silu_mul) only: the up projection's weight (laid out like b) and bias; the residual slot
    # holds U = a @ up_b + up_bias, which prepare_residual_slot computes with PyTorch before each run.
    up_b_storage: object = None
    up_b: object = None
    up_bias: object = None


def make_operands(problem: GemmProblem, device, generator=None) -> Operands:
    """Fresh random operands (randn, B scaled by 1/sqrt(K) so that A@B entries are about N(0,1))."""
    import torch
    p = problem
    dt = torch_dtype(p.dtype)

    def randn(*shape, scale=1.0):
        x = torch.randn(*shape, device=device, dtype=torch.float32, generator=generator)
        return (x * scale).to(dt)

    if p.layout_a == "row":
        a_storage = randn(p.batch, p.m, p.k)
        a, lda = a_storage, p.k
    else:
        a_storage = randn(p.batch, p.k, p.m)
        a, lda = a_storage.transpose(1, 2), p.m
    scale_b = 1.0 / math.sqrt(p.k)

    def weight():
        if p.layout_b == "row":
            storage = randn(p.batch, p.k, p.n, scale=scale_b)
            return storage, storage, p.n
        storage = randn(p.batch, p.n, p.k, scale=scale_b)
        return storage, storage.transpose(1, 2), p.k

    b_storage, b, ldb = weight()
    bias = randn(p.n, scale=0.5) if p.has_bias else None
    up_b_storage = up_b = up_bias = None
    if p.swiglu:
        up_b_storage, up_b, _ = weight()
        up_bias = randn(p.n, scale=0.5)
        residual = torch.full((p.batch, p.m, p.n), float("nan"), device=device, dtype=dt)  # U, computed later
    else:
        residual = randn(p.batch, p.m, p.n) if p.has_residual else None
    numel = p.batch * p.m * p.n
    d_buffer = torch.full((numel + 2 * GUARD_ELEMENTS,), float("nan"), device=device, dtype=dt)
    d = d_buffer[GUARD_ELEMENTS:GUARD_ELEMENTS + numel].view(p.batch, p.m, p.n)
    return Operands(a_storage, b_storage, a, b, bias, residual, d_buffer, d, lda, ldb, up_b_storage, up_b, up_bias)


def up_projection(a, up_b, up_bias, out=None):
    """U = a @ up_b + up_bias as PyTorch eager runs a Linear (addmm when unbatched), optionally into `out`."""
    import torch
    if a.dim() == 2:
        return torch.addmm(up_bias, a, up_b, out=out)
    return torch.baddbmm(up_bias, a, up_b, out=out)


def prepare_residual_slot(problem: GemmProblem, ops: Operands) -> None:
    """SwiGLU: fills the residual slot with U, computed by PyTorch in the current matmul precision, as the
    composed module does before the FACT kernel. Other epilogues: nothing to do."""
    if not problem.swiglu:
        return
    if problem.batch == 1:
        up_projection(ops.a[0], ops.up_b[0], ops.up_bias, out=ops.residual[0])
    else:
        up_projection(ops.a, ops.up_b, ops.up_bias, out=ops.residual)


def bytes_per_set(problem: GemmProblem) -> int:
    p = problem
    elem = {"float32": 4, "bfloat16": 2, "float16": 2}[p.dtype]
    n = p.batch * (p.m * p.k + p.k * p.n + p.m * p.n) + (p.n if p.has_bias else 0)
    n += p.batch * p.m * p.n if p.has_residual else 0
    n += p.batch * p.k * p.n + p.n if p.swiglu else 0
    return n * elem


def poison(ops: Operands) -> None:
    ops.d_buffer.fill_(float("nan"))


def apply_activation(x, activation: str):
    import torch.nn.functional as F
    if activation == "none":
        return x
    if activation == "relu":
        return F.relu(x)
    if activation == "silu":
        return F.silu(x)
    if activation == "gelu_erf":
        return F.gelu(x)
    if activation == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    raise ValueError(f"unknown activation {activation!r}")


def reference(problem: GemmProblem, ops: Operands):
    """epilogue(A @ B) in float64 on the operands' device: act(A@B + bias) [+ residual]; for SwiGLU the
    whole matched subgraph, silu(A@B + bias) * (A@B_up + bias_up), from the inputs (not from the computed U)."""
    import torch
    out = torch.matmul(ops.a.double(), ops.b.double())
    if ops.bias is not None:
        out = out + ops.bias.double()
    out = apply_activation(out, problem.activation)
    if problem.swiglu:
        return out * (torch.matmul(ops.a.double(), ops.up_b.double()) + ops.up_bias.double())
    if ops.residual is not None:
        out = out + ops.residual.double()
    return out


@dataclass
class Check:
    passed: bool
    rel_err: float | None
    max_abs_err: float | None
    max_err_vs_peak: float | None
    message: str | None


def compare(out, ref, tol: float, d_buffer=None) -> Check:
    """Checks `out` (any float dtype, shaped like `ref`) against the float64 reference."""
    import torch
    if d_buffer is not None:
        g = GUARD_ELEMENTS
        guards = torch.cat([d_buffer[:g], d_buffer[-g:]])
        touched = int((~torch.isnan(guards)).sum())
        if touched:
            return Check(False, None, None, None,
                         f"wrote outside D: {touched} of {2 * g} guard elements next to D changed")
    o = out.double()
    unwritten = int(torch.isnan(o).sum())
    if unwritten:
        first = torch.nonzero(torch.isnan(o))[0].tolist()
        return Check(False, None, None, None,
                     f"{unwritten} of {o.numel()} output elements not written (still NaN), first at {first}")
    nonfinite = int((~torch.isfinite(o)).sum())
    if nonfinite:
        return Check(False, None, None, None, f"{nonfinite} output elements are +-inf")
    diff = o - ref
    ref_norm = float(torch.linalg.vector_norm(ref))
    rel = float(torch.linalg.vector_norm(diff)) / max(ref_norm, 1e-300)
    max_abs = float(diff.abs().max())
    peak = float(ref.abs().max())
    vs_peak = max_abs / max(peak, 1e-300)
    if rel > tol or vs_peak > tol:
        worst = torch.nonzero(diff.abs() == max_abs)[0].tolist()
        return Check(False, rel, max_abs, vs_peak,
                     f"error over tolerance {tol:.3g}: rel_err {rel:.3g}, max_abs_err {max_abs:.3g} "
                     f"(max|err|/max|ref| {vs_peak:.3g}) at {worst}")
    return Check(True, rel, max_abs, vs_peak, None)


def _inputs(ops: Operands) -> list:
    return [t for t in (ops.a_storage, ops.b_storage, ops.bias, ops.residual, ops.up_b_storage, ops.up_bias)
            if t is not None]


def inputs_snapshot(ops: Operands) -> list:
    return [t.clone() for t in _inputs(ops)]


def inputs_unchanged(ops: Operands, snapshot: list) -> bool:
    import torch
    return all(torch.equal(x, y) for x, y in zip(_inputs(ops), snapshot))
