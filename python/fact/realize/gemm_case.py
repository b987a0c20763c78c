"""The GEMM family's measurement case: D = epilogue(A @ B) as mm, bmm, matmul, linear, addmm and baddbmm
with a fused epilogue (bias, activation, residual, or SwiGLU's silu(gate) * up), batched, A and B row- or
column-major, in fp32, 3xTF32, TF32, bf16 or fp16 numerics.

Verified against epilogue(A @ B) in float64 on the same rounded operands, within verify.py's table at this K.
Baseline: what PyTorch eager runs (cuBLAS matmul/addmm plus PyTorch's epilogue ops) in the same numerics;
beside it the error of cuBLAS in full fp32 on the same inputs, which a 3xTF32 kernel must match. The kernel
takes a workspace (CUTLASS split-K / stream-K). When B is a module weight (b_constant), a kernel that copies B
before its GEMM (3xTF32 split, K-major TF32 copy) is timed with that copy made once and kept, as the composed
module's op keeps it; verification runs both ways. SwiGLU's U is computed by PyTorch right before the kernel,
as the composed module does, so its time counts toward the kernel's.
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

from ..compose.reference.gemm import (check_tree, epilogue_leaves, evaluate_epilogue, load_epilogue_tables, tree_leaves,
                                      tree_slots, vector_slots)
from ..paths import data_dir
from . import verify
from .kernel_abi import FACT_GEMM_MAX_VECTORS, FactGemmArgs
from .measure_case import MeasureCase
from .problem_fields import JsonProblem, ProblemError, check_keys, choice, flag, integer

LAYOUTS = ("row", "col")
DTYPES = ("float32", "bfloat16", "float16")
NUMERICS = ("fp32", "3xtf32", "tf32", "bf16", "fp16")

def epilogue_tables():
    """(predefined trees by name, activation table) from data/epilogues/."""
    return load_epilogue_tables(data_dir() / "epilogues")

# Which numerics modes an operand dtype admits: fp32 tensors can be multiplied in full fp32,
# in 3xTF32 (fp32-accurate on tensor cores) or in TF32; bf16/fp16 tensors only in their own type.
NUMERICS_FOR_DTYPE = {"float32": ("fp32", "3xtf32", "tf32"), "bfloat16": ("bf16",), "float16": ("fp16",)}
DEFAULT_NUMERICS = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
PROBLEM_KEYS = ("m", "n", "k", "batch", "layout_a", "layout_b", "dtype", "numerics", "epilogue", "b_constant")


@dataclass(frozen=True)
class GemmProblem(JsonProblem):
    m: int
    n: int
    k: int
    batch: int
    layout_a: str
    layout_b: str
    dtype: str
    numerics: str
    epilogue: object  # a predefined epilogue's name (data/epilogues/named.json) or an epilogue tree (its JSON)
    b_constant: bool = False  # B is a module weight: a kernel's pre-pass copy of it is kept between calls

    @property
    def tree(self):
        """The epilogue tree (compact JSON form, src/realize/families/gemm/epilogue_tree.h)."""
        return epilogue_tables()[0][self.epilogue] if isinstance(self.epilogue, str) else self.epilogue

    @property
    def bias_length(self) -> int:
        """Elements of the bias vector the epilogue reads: N for a row broadcast, M for a column one, 0 for none."""
        kind = tree_slots(self.tree).get("bias")
        return self.n if kind == "row" else self.m if kind == "col" else 0

    @property
    def vector_lengths(self) -> dict:
        """{"vec<i>": elements} of each vector slot the tree reads, in slot order: N for a row vector, one per
        output row (batch * M) for a column vector, 1 for a run-time scalar (FactGemmArgs::vectors' layout)."""
        slots = tree_slots(self.tree)
        size = {"row": self.n, "col": self.batch * self.m, "scalar": 1}
        return {slot: size[slots[slot]] for slot in vector_slots(self.tree)}

    @property
    def has_bias(self) -> bool:
        return self.bias_length > 0

    @property
    def has_residual(self) -> bool:
        """Whether the kernel reads a tensor shaped like D through the residual slot (a residual, or U)."""
        return "residual" in tree_leaves(self.tree)

    @property
    def swiglu(self) -> bool:
        """silu(A @ B + bias) * U, with U = A @ B_up + bias_up (SwiGLU's up projection) computed first."""
        return self.epilogue == "bias_silu_mul"


def parse_problem(obj, where: str = "request.problem") -> GemmProblem:
    check_keys(obj, PROBLEM_KEYS, where)
    dtype = choice(obj, "dtype", where, DTYPES)
    numerics = choice(obj, "numerics", where, NUMERICS, DEFAULT_NUMERICS[dtype])
    if numerics not in NUMERICS_FOR_DTYPE[dtype]:
        raise ProblemError(f"{where}.numerics: {numerics!r} does not go with dtype {dtype!r}; "
                           f"allowed for {dtype}: {', '.join(NUMERICS_FOR_DTYPE[dtype])}")
    return GemmProblem(
        m=integer(obj, "m", where), n=integer(obj, "n", where), k=integer(obj, "k", where),
        batch=integer(obj, "batch", where, default=1),
        layout_a=choice(obj, "layout_a", where, LAYOUTS, "row"),
        layout_b=choice(obj, "layout_b", where, LAYOUTS, "row"),
        dtype=dtype, numerics=numerics,
        epilogue=parse_epilogue(obj.get("epilogue", "none"), f"{where}.epilogue"),
        b_constant=flag(obj, "b_constant", where),
    )


def parse_epilogue(value, where: str):
    """A predefined epilogue's name, or an epilogue tree checked against the activation table."""
    named, activations = epilogue_tables()
    if isinstance(value, str):
        if value not in named:
            raise ProblemError(f"{where}: {value!r} is not one of {', '.join(named)} (the predefined epilogues); "
                               f"give one of them or an epilogue tree")
        return value
    try:
        check_tree(value, activations)
    except ValueError as e:
        raise ProblemError(f"{where}: {e}") from None
    return value


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
    # holds U = a @ up_b + up_bias, which GemmCase.prepare_residual_slot computes with PyTorch before each run.
    up_b_storage: object = None
    up_b: object = None
    up_bias: object = None
    # The epilogue's vec<i> slots, {"vec<i>": flat tensor} (problem.vector_lengths), uniform in [0.5, 1.5].
    vectors: dict = None

    @property
    def outputs(self) -> dict:
        return {"d": (self.d, self.d_buffer)}


def up_projection(a, up_b, up_bias, out=None):
    """U = a @ up_b + up_bias as PyTorch eager runs a Linear (addmm when unbatched), optionally into `out`."""
    import torch
    if a.dim() == 2:
        return torch.addmm(up_bias, a, up_b, out=out)
    return torch.baddbmm(up_bias, a, up_b, out=out)


def torch_epilogue_gemm(problem: GemmProblem, ops: Operands):
    """What PyTorch eager runs for this problem: matmul (addmm where the tree adds a bias to the unbatched product,
    as a Linear runs) + the tree's pointwise ops; for SwiGLU the whole subgraph, silu(gate GEMM) * up GEMM, both
    GEMMs included."""
    import torch
    if problem.batch == 1:
        a, b = ops.a[0], ops.b[0]
        residual = ops.residual[0] if ops.residual is not None else None
    else:
        a, b, residual = ops.a, ops.b, ops.residual
    if problem.swiglu:
        residual = up_projection(a, ops.up_b[0] if problem.batch == 1 else ops.up_b, ops.up_bias)
    acc = None

    def matmul():
        nonlocal acc
        if acc is None:
            acc = torch.matmul(a, b)
        return acc

    def linear():
        if problem.batch == 1 or problem.swiglu:
            return up_projection(a, b, ops.bias)  # the same addmm form as a Linear
        return matmul() + ops.bias

    _, activations = epilogue_tables()
    rows = (problem.m,) if problem.batch == 1 else (problem.batch, problem.m)
    leaves = epilogue_leaves(None, ops.bias, residual, "the GEMM problem", ops.vectors, rows)
    leaf = lambda name: matmul() if name == "acc" else leaves(name)  # noqa: E731
    out = evaluate_epilogue(problem.tree, activations, leaf, linear)
    return out.reshape(problem.batch, problem.m, problem.n)


class GemmCase(MeasureCase):
    family = "gemm"
    args_type = FactGemmArgs
    has_workspace = True

    def tolerance(self) -> float:
        return verify.tolerance(self.problem.numerics, self.problem.k)

    def tolerance_table(self) -> dict:
        return verify.tolerance_table(self.problem.k)

    def bytes_per_set(self) -> int:
        p = self.problem
        elem = {"float32": 4, "bfloat16": 2, "float16": 2}[p.dtype]
        n = p.batch * (p.m * p.k + p.k * p.n + p.m * p.n) + p.bias_length + sum(p.vector_lengths.values())
        n += p.batch * p.m * p.n if p.has_residual else 0
        n += p.batch * p.k * p.n + p.n if p.swiglu else 0
        return n * elem

    def make_inputs(self, device, generator=None) -> Operands:
        """Fresh random operands (randn, B scaled by 1/sqrt(K) so that A@B entries are about N(0,1))."""
        import torch
        p = self.problem
        dt = verify.torch_dtype(p.dtype)

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
        bias = randn(p.bias_length, scale=0.5) if p.has_bias else None
        up_b_storage = up_b = up_bias = None
        if p.swiglu:
            up_b_storage, up_b, _ = weight()
            up_bias = randn(p.n, scale=0.5)
            residual = torch.full((p.batch, p.m, p.n), float("nan"), device=device, dtype=dt)  # U, computed later
        else:
            residual = randn(p.batch, p.m, p.n) if p.has_residual else None
        numel = p.batch * p.m * p.n
        g = verify.GUARD_ELEMENTS
        d_buffer = torch.full((numel + 2 * g,), float("nan"), device=device, dtype=dt)
        d = d_buffer[g:g + numel].view(p.batch, p.m, p.n)
        # Uniform in [0.5, 1.5]: positive, so a slot under a sqrt or a division (a folded BatchNorm's var) is valid.
        vectors = {slot: (torch.rand(length, device=device, dtype=torch.float32, generator=generator) + 0.5).to(dt)
                   for slot, length in p.vector_lengths.items()}
        return Operands(a_storage, b_storage, a, b, bias, residual, d_buffer, d, lda, ldb, up_b_storage, up_b,
                        up_bias, vectors)

    def input_tensors(self, ops: Operands) -> list:
        return [t for t in (ops.a_storage, ops.b_storage, ops.bias, ops.residual, ops.up_b_storage, ops.up_bias,
                            *(ops.vectors or {}).values()) if t is not None]

    def pre_kernel(self):
        return self.prepare_residual_slot if self.problem.swiglu else None

    def prepare_residual_slot(self, ops: Operands) -> None:
        """SwiGLU: fills the residual slot with U, computed by PyTorch in the current matmul precision, as the
        composed module does before the FACT kernel."""
        if self.problem.batch == 1:
            up_projection(ops.a[0], ops.up_b[0], ops.up_bias, out=ops.residual[0])
        else:
            up_projection(ops.a, ops.up_b, ops.up_bias, out=ops.residual)

    def kernel_args(self, ops: Operands, stream_ptr: int) -> FactGemmArgs:
        """The argument struct without a workspace (the worker attaches one)."""
        p = self.problem
        ptr = lambda t: ctypes.c_void_p(t.data_ptr()) if t is not None else None  # noqa: E731
        vectors = (ctypes.c_void_p * FACT_GEMM_MAX_VECTORS)()
        for slot, t in (ops.vectors or {}).items():
            vectors[int(slot[3:])] = t.data_ptr()
        return FactGemmArgs(
            m=p.m, n=p.n, k=p.k, batch=p.batch,
            a=ptr(ops.a_storage), lda=ops.lda, batch_stride_a=p.m * p.k,
            b=ptr(ops.b_storage), ldb=ops.ldb, batch_stride_b=p.k * p.n,
            c=None, ldc=p.n, batch_stride_c=p.m * p.n,
            d=ptr(ops.d), ldd=p.n, batch_stride_d=p.m * p.n,
            bias=ptr(ops.bias), residual=ptr(ops.residual), vectors=vectors,
            alpha=1.0, beta=0.0, workspace=None, workspace_bytes=0, stream=ctypes.c_void_p(stream_ptr),
        )

    def keep_between_calls(self, lib, ops: Operands, args: FactGemmArgs):
        """A module weight's pre-pass copy, made once by the kernel's prepare_b and attached to args (the op
        library keeps it so); the tensor to hold while args is used, or None when B is not constant or the kernel
        makes no copy."""
        if not self.problem.b_constant:
            return None
        size = lib.prepared_b_bytes(args)
        if not size:
            return None
        import torch
        kept = torch.empty(size, dtype=torch.uint8, device=ops.b_storage.device)
        code = lib.prepare_b(args, kept.data_ptr())
        if code != 0:
            raise RuntimeError(f"prepare_b returned {code}")
        args.prepared_b = ctypes.c_void_p(kept.data_ptr())
        return kept

    def reference(self, ops: Operands) -> dict:
        """The epilogue tree over A @ B in float64 on the operands' device; for SwiGLU the whole matched subgraph,
        silu(A@B + bias) * (A@B_up + bias_up), from the inputs (not from the computed U)."""
        import torch
        p = self.problem
        f64 = lambda t: t.double() if t is not None else None  # noqa: E731
        acc = torch.matmul(ops.a.double(), ops.b.double())
        residual = f64(ops.residual)
        if p.swiglu:
            residual = torch.matmul(ops.a.double(), ops.up_b.double()) + ops.up_bias.double()
        _, activations = epilogue_tables()
        vectors = {slot: t.double() for slot, t in (ops.vectors or {}).items()}
        leaf = epilogue_leaves(acc, f64(ops.bias), residual, "the GEMM problem", vectors)
        return {"d": evaluate_epilogue(p.tree, activations, leaf)}

    def baselines(self) -> list:
        p = self.problem
        name = "torch.matmul (cuBLAS)" + ("" if p.epilogue == "none" else " + PyTorch epilogue ops")
        if p.swiglu:
            name = "torch silu(addmm) * addmm (cuBLAS gate and up GEMMs + PyTorch epilogue ops)"
        return [(name, lambda ops: {"d": torch_epilogue_gemm(p, ops)})]

    def fp32_reference_err(self, ops: Operands, ref: dict) -> float:
        """Relative error of cuBLAS fp32 ('highest') on the same inputs: the accuracy 3xTF32 must match."""
        import torch
        previous = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest")
        try:
            f32 = lambda t: t.float() if t is not None else None  # noqa: E731
            up = Operands(f32(ops.a_storage), f32(ops.b_storage), f32(ops.a), f32(ops.b), f32(ops.bias),
                          f32(ops.residual), None, None, ops.lda, ops.ldb,
                          f32(ops.up_b_storage), f32(ops.up_b), f32(ops.up_bias),
                          {slot: t.float() for slot, t in (ops.vectors or {}).items()})
            res = torch_epilogue_gemm(self.problem, up).double()
            return float(torch.linalg.vector_norm(res - ref["d"]) / torch.linalg.vector_norm(ref["d"]))
        finally:
            torch.set_float32_matmul_precision(previous)


Case = GemmCase
