"""The worker process of `measure`: runs the baseline and candidates on the GPU, one JSON line per event.

Run by measure.py as `python -m fact.realize.measure_worker JOB.json`; JOB holds the request, the ids of
the candidates still to measure and whether the baseline is still to run. The protocol goes to the
original stdout; fd 1 is pointed at stderr so that a candidate library printing to stdout cannot corrupt
it. Events, in order:
  {"event": "ready", "device", "torch", "cuda", ...}
  {"event": "start", "item": "baseline" | <candidate id>}
  {"event": "baseline", ...} / {"event": "candidate", ...}   (one per started item)
  {"event": "done"}                                             or {"event": "fatal", "message"}
After a candidate leaves the CUDA context unusable (an illegal address is sticky), the worker reports it
as crashed and exits with EXIT_CONTEXT_LOST; measure.py starts a fresh worker for the rest.
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
import traceback

from . import timing, verify
from .kernel_abi import FactGemmArgs, KernelLibrary, KernelLoadError, status_name
from .measure_request import GemmProblem, MeasureRequest, parse_request
from fact.gpu_lock import holds_gpu

EXIT_CONTEXT_LOST = 70


class Protocol:
    def __init__(self):
        self._out = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr

    def emit(self, event: str, **fields) -> None:
        self._out.write(json.dumps({"event": event, **fields}) + "\n")
        self._out.flush()


def precision_of(numerics: str) -> str:
    """torch.set_float32_matmul_precision for the baseline, or the low-precision dtype's name."""
    return {"fp32": "highest", "3xtf32": "highest", "tf32": "high", "bf16": "bf16", "fp16": "fp16"}[numerics]


def set_matmul_precision(numerics: str) -> None:
    import torch
    p = precision_of(numerics)
    torch.set_float32_matmul_precision(p if p in ("highest", "high") else "highest")


def environment() -> dict:
    import torch
    props = torch.cuda.get_device_properties(0)
    return {
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
        "capability": "%d.%d" % torch.cuda.get_device_capability(0),
        "sm_count": props.multi_processor_count, "l2_bytes": int(getattr(props, "L2_cache_size", 50 << 20)),
        "allow_bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "allow_fp16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
    }


def context_usable() -> bool:
    """False when the CUDA context is poisoned (sticky error): nothing more can run in this process."""
    import torch
    try:
        torch.cuda.synchronize()
        return float(torch.ones(16, device="cuda").sum().item()) == 16.0
    except Exception:
        return False


def gemm_args(problem: GemmProblem, ops: verify.Operands, stream_ptr: int) -> FactGemmArgs:
    p = problem
    ptr = lambda t: ctypes.c_void_p(t.data_ptr()) if t is not None else None  # noqa: E731
    return FactGemmArgs(
        m=p.m, n=p.n, k=p.k, batch=p.batch,
        a=ptr(ops.a_storage), lda=ops.lda, batch_stride_a=p.m * p.k,
        b=ptr(ops.b_storage), ldb=ops.ldb, batch_stride_b=p.k * p.n,
        c=None, ldc=p.n, batch_stride_c=p.m * p.n,
        d=ptr(ops.d), ldd=p.n, batch_stride_d=p.m * p.n,
        bias=ptr(ops.bias), residual=ptr(ops.residual),
        alpha=1.0, beta=0.0, workspace=None, workspace_bytes=0, stream=ctypes.c_void_p(stream_ptr),
    )


def torch_epilogue_gemm(problem: GemmProblem, ops: verify.Operands):
    """What PyTorch eager runs for this problem: matmul (addmm when unbatched with bias) + epilogue ops;
    for SwiGLU the whole subgraph, silu(gate GEMM) * up GEMM, both GEMMs included."""
    import torch
    if problem.batch == 1:
        a, b = ops.a[0], ops.b[0]
        residual = ops.residual[0] if ops.residual is not None else None
    else:
        a, b, residual = ops.a, ops.b, ops.residual
    if problem.swiglu:
        gate = verify.up_projection(a, b, ops.bias)  # the same addmm form as the up projection
        up = verify.up_projection(a, ops.up_b[0] if problem.batch == 1 else ops.up_b, ops.up_bias)
        return (verify.apply_activation(gate, "silu") * up).view(problem.batch, problem.m, problem.n)
    if ops.bias is not None and problem.batch == 1:
        out = torch.addmm(ops.bias, a, b)
    else:
        out = torch.matmul(a, b)
        if ops.bias is not None:
            out = out + ops.bias
    out = verify.apply_activation(out, problem.activation)
    if residual is not None:
        out = out + residual
    return out.view(problem.batch, problem.m, problem.n)


class Worker:
    def __init__(self, request: MeasureRequest, proto: Protocol):
        import torch
        self.torch = torch
        self.request = request
        self.problem = request.problem
        self.proto = proto
        self.device = torch.device("cuda", 0)
        self.stream = torch.cuda.current_stream()
        self.tol = verify.tolerance(self.problem.numerics, self.problem.k)
        self.env = environment()
        self.n_sets = timing.rotation_count(verify.bytes_per_set(self.problem), self.env["l2_bytes"])
        set_matmul_precision(self.problem.numerics)
        self.sets = [verify.make_operands(self.problem, self.device) for _ in range(self.n_sets)]
        self.bytes_per_set = verify.bytes_per_set(self.problem)

    # -- baseline -------------------------------------------------------------------------------
    def baseline(self) -> dict:
        torch, p = self.torch, self.problem
        name = "torch.matmul (cuBLAS)" + ("" if p.epilogue == "none" else " + PyTorch epilogue ops")
        if p.swiglu:
            name = "torch silu(addmm) * addmm (cuBLAS gate and up GEMMs + PyTorch epilogue ops)"
        out = {"name": name,
               "precision": precision_of(p.numerics), "status": "ok", "message": None}
        worst = verify.Check(True, 0.0, 0.0, 0.0, None)
        fp32_errs = []
        for _ in range(self.request.trials):
            ops = verify.make_operands(p, self.device)
            ref = verify.reference(p, ops)
            res = torch_epilogue_gemm(p, ops)
            torch.cuda.synchronize()
            check = verify.compare(res, ref, self.tol)
            if check.rel_err is not None and check.rel_err >= (worst.rel_err or 0.0):
                worst = check
            if not check.passed:
                out.update(status="verify_failed", message=f"cuBLAS baseline: {check.message}")
            fp32_errs.append(self.fp32_reference_err(ops, ref))
        timed = timing.time_launches(lambda i: torch_epilogue_gemm(p, self.sets[i]), self.n_sets,
                                     self.request.warmup_ms, self.request.rep_ms)
        out.update(ms=timed.ms, rel_err=worst.rel_err, max_abs_err=worst.max_abs_err,
                   max_err_vs_peak=worst.max_err_vs_peak, timing=timed.to_json())
        out["fp32_reference_err"] = max(fp32_errs)
        return out

    def fp32_reference_err(self, ops: verify.Operands, ref) -> float:
        """Relative error of cuBLAS fp32 ('highest') on the same inputs: the accuracy 3xTF32 must match."""
        torch, p = self.torch, self.problem
        previous = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest")
        try:
            f32 = lambda t: t.float() if t is not None else None  # noqa: E731
            up = verify.Operands(f32(ops.a_storage), f32(ops.b_storage), f32(ops.a), f32(ops.b), f32(ops.bias),
                                 f32(ops.residual), None, None, ops.lda, ops.ldb,
                                 f32(ops.up_b_storage), f32(ops.up_b), f32(ops.up_bias))
            res = torch_epilogue_gemm(p, up).double()
            return float(torch.linalg.vector_norm(res - ref) / torch.linalg.vector_norm(ref))
        finally:
            torch.set_float32_matmul_precision(previous)

    # -- candidates -----------------------------------------------------------------------------
    def candidate(self, cid: str, library: str) -> tuple[dict, bool]:
        """Measures one candidate; returns (result, context_lost)."""
        torch, p = self.torch, self.problem
        res = {"id": cid, "status": "ok", "ms": None, "rel_err": None, "max_abs_err": None,
               "max_err_vs_peak": None, "tolerance": self.tol, "message": None, "config": None}

        def fail(status: str, message: str, context_lost: bool = False):
            res.update(status=status, message=message)
            return res, context_lost

        try:
            lib = KernelLibrary(library, cid)
        except KernelLoadError as e:
            return fail("load_failed", str(e))
        text = lib.describe()
        try:
            res["config"] = json.loads(text) if text else None
        except json.JSONDecodeError:
            res["config"] = text

        stream_ptr = self.stream.cuda_stream
        worst = None
        for trial in range(self.request.trials):
            ops = verify.make_operands(p, self.device)
            verify.prepare_residual_slot(p, ops)  # SwiGLU: U by PyTorch, as the composed module runs it
            args = gemm_args(p, ops, stream_ptr)
            code = lib.can_implement(args)
            if code != 0:
                return fail("cannot_implement", f"can_implement returned {status_name(code)}")
            ws_bytes = lib.workspace_bytes(args)
            # Handed over as 0xFF bytes: a kernel must initialize what it needs (CUTLASS initialize() does).
            workspace = torch.full((max(ws_bytes, 1),), 255, dtype=torch.uint8, device=self.device)
            args.workspace, args.workspace_bytes = ctypes.c_void_p(workspace.data_ptr()), ws_bytes
            ref = verify.reference(p, ops)
            snapshot = verify.inputs_snapshot(ops)
            torch.cuda.synchronize()
            code = lib.run(args)
            if code != 0:
                return fail("launch_failed", f"run returned {status_name(code)} (trial {trial})")
            try:
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - any CUDA error: decide by the context's health
                lost = not context_usable()
                return fail("crashed" if lost else "launch_failed",
                            f"CUDA error after run (trial {trial}): {first_line(e)}", lost)
            check = verify.compare(ops.d, ref, self.tol, ops.d_buffer)
            if not check.passed:
                res.update(rel_err=check.rel_err, max_abs_err=check.max_abs_err,
                           max_err_vs_peak=check.max_err_vs_peak)
                return fail("verify_failed", f"trial {trial}: {check.message}")
            if not verify.inputs_unchanged(ops, snapshot):
                return fail("verify_failed", f"trial {trial}: the kernel modified its inputs A, B, bias or residual")
            if worst is None or check.rel_err > worst.rel_err:
                worst = check
            del ops, ref, snapshot, workspace
        res.update(rel_err=worst.rel_err, max_abs_err=worst.max_abs_err, max_err_vs_peak=worst.max_err_vs_peak)

        # Timing over the rotating sets, one prebuilt argument struct each, one shared workspace.
        arg_sets = [gemm_args(p, ops, stream_ptr) for ops in self.sets]
        ws_bytes = max(lib.workspace_bytes(a) for a in arg_sets)
        workspace = torch.full((max(ws_bytes, 1),), 255, dtype=torch.uint8, device=self.device)
        refs = []
        for a in arg_sets:
            a.workspace, a.workspace_bytes = ctypes.c_void_p(workspace.data_ptr()), ws_bytes
            refs.append(ctypes.byref(a))
        run = lib.run_fn()
        bad = []

        # SwiGLU's FACT time includes the up projection that feeds the kernel its U.
        prepare = (lambda i: verify.prepare_residual_slot(p, self.sets[i])) if p.swiglu else (lambda i: None)

        def launch(i: int) -> None:
            prepare(i)
            if run(refs[i]) != 0 and not bad:
                bad.append(i)

        try:
            timed = timing.time_launches(launch, len(arg_sets), self.request.warmup_ms, self.request.rep_ms)
        except Exception as e:  # noqa: BLE001
            lost = not context_usable()
            return fail("crashed" if lost else "launch_failed", f"while timing: {first_line(e)}", lost)
        if bad:
            return fail("launch_failed", f"run returned non-zero while timing (input set {bad[0]})")
        res.update(ms=timed.ms, timing=timed.to_json(), workspace_bytes=ws_bytes)
        return res, False


def first_line(e: BaseException) -> str:
    for line in str(e).splitlines():
        if line.strip():
            return f"{type(e).__name__}: {line.strip()}"
    return type(e).__name__


@holds_gpu
def main(argv: list[str]) -> int:
    proto = Protocol()
    try:
        with open(argv[0]) as f:
            job = json.load(f)
        request = parse_request(job["request"])
        if request.family == "gemm":
            worker = Worker(request, proto)
        else:
            from .family_worker import FamilyWorker
            worker = FamilyWorker(request, proto)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which records it
        traceback.print_exc()
        proto.emit("fatal", message=f"worker set-up failed: {first_line(e)}")
        return 1
    proto.emit("ready", rotating_sets=worker.n_sets, bytes_per_set=worker.bytes_per_set,
               **worker.env)
    if job.get("baseline"):
        proto.emit("start", item="baseline")
        try:
            proto.emit("baseline", **worker.baseline())
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            proto.emit("baseline", status="failed", message=first_line(e))
            if not context_usable():
                return EXIT_CONTEXT_LOST
    libraries = {c.id: c.library for c in request.candidates}
    for cid in job.get("candidate_ids", []):
        proto.emit("start", item=cid)
        try:
            result, lost = worker.candidate(cid, libraries[cid])
        except Exception as e:  # noqa: BLE001 - a bug here or in the candidate's host code
            traceback.print_exc()
            lost = not context_usable()
            result = {"id": cid, "status": "crashed", "message": f"exception while measuring: {first_line(e)}"}
        proto.emit("candidate", **result)
        if lost:
            return EXIT_CONTEXT_LOST
    proto.emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
