"""Verifying a kernel's output, for every family's case: the tolerance table by numerics mode and the check
of a NaN-poisoned, guarded output against a float64 reference.

Per trial a case draws its inputs anew (never zeros: zeros hide unwritten outputs and wrong indexing) and
fills each output, with guard regions on both sides, with NaN; after the run every element must be written
(no NaN left), nothing outside the output may change, and the error against the float64 reference (same
rounded inputs) must be within the tolerance, both as relative Frobenius error and as the largest element
error over the largest |reference| element (which catches a few wrong elements, e.g. one bad edge tile).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

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


# Guard elements on each side of an output: a kernel that writes past its edges is caught here.
GUARD_ELEMENTS = 4096


@dataclass
class Check:
    passed: bool
    rel_err: float | None
    max_abs_err: float | None
    max_err_vs_peak: float | None
    message: str | None


COMPARE_CHUNK = 1 << 25  # elements per chunk of compare(): 256 MB per float64 temporary


def compare(out, ref, tol: float, d_buffer=None) -> Check:
    """Checks `out` (any float dtype, shaped like `ref`) against the reference computed in float64 (stored in float64,
    or in float32 where float64 would not fit beside the inputs: 1e-7 relative, far under every tolerance)."""
    import torch
    if d_buffer is not None:
        g = GUARD_ELEMENTS
        guards = torch.cat([d_buffer[:g], d_buffer[-g:]])
        touched = int((~torch.isnan(guards)).sum())
        if touched:
            return Check(False, None, None, None,
                         f"wrote outside D: {touched} of {2 * g} guard elements next to D changed")
    # In chunks of the flattened tensors: float64 temporaries of a multi-GB output would not fit beside it.
    o_flat, r_flat = out.reshape(-1), ref.reshape(-1)
    unwritten = nonfinite = 0
    first_nan = None
    diff_sq = ref_sq = 0.0
    max_abs, max_at, peak = -1.0, 0, 0.0
    for start in range(0, o_flat.numel(), COMPARE_CHUNK):
        o = o_flat[start:start + COMPARE_CHUNK].double()
        r = r_flat[start:start + COMPARE_CHUNK].double()  # a multi-GB reference may be stored in float32
        nan = torch.isnan(o)
        n = int(nan.sum())
        if n and first_nan is None:
            first_nan = start + int(torch.nonzero(nan)[0])
        unwritten += n
        nonfinite += int((~torch.isfinite(o)).sum()) - n
        if unwritten:
            continue
        diff = (o - r).abs_()
        diff_sq += float(torch.dot(diff, diff))
        ref_sq += float(torch.dot(r, r))
        m = float(diff.max()) if diff.numel() else 0.0
        if m > max_abs:
            max_abs, max_at = m, start + int(diff.argmax())
        peak = max(peak, float(r.abs().max()) if r.numel() else 0.0)
    index = lambda flat: list(map(int, torch.unravel_index(torch.tensor(flat), tuple(out.shape))))  # noqa: E731
    if unwritten:
        return Check(False, None, None, None,
                     f"{unwritten} of {out.numel()} output elements not written (still NaN), first at {index(first_nan)}")
    if nonfinite:
        return Check(False, None, None, None, f"{nonfinite} output elements are +-inf")
    max_abs = max(max_abs, 0.0)
    rel = diff_sq ** 0.5 / max(ref_sq ** 0.5, 1e-300)
    vs_peak = max_abs / max(peak, 1e-300)
    if rel > tol or vs_peak > tol:
        return Check(False, rel, max_abs, vs_peak,
                     f"error over tolerance {tol:.3g}: rel_err {rel:.3g}, max_abs_err {max_abs:.3g} "
                     f"(max|err|/max|ref| {vs_peak:.3g}) at {index(max_at)}")
    return Check(True, rel, max_abs, vs_peak, None)


def snapshot(inputs: list) -> list:
    """Copies of what a kernel reads, to check afterwards that it left them unchanged."""
    return [t.clone() for t in inputs]


def unchanged(inputs: list, copies: list) -> bool:
    import torch
    return all(torch.equal(x, y) for x, y in zip(inputs, copies))
