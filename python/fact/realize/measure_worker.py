"""The worker process of `measure`: runs the baseline and candidates on the GPU, one JSON line per event.
What is family-specific (inputs, argument struct, float64 replay, PyTorch's ways) comes from the request's
family case (family_cases.py); verifying and timing are the same for every family.

Run by measure.py as `python -m fact.realize.measure_worker`, with JOB.json's path as the first line of its stdin
(or `... measure_worker JOB.json`); JOB holds the request, the ids of the candidates still to measure and whether
the baseline is still to run. torch is imported before the job is read, so a worker started ahead of its job
(measure.py --prewarm) has it imported when the job comes; it takes the GPU's lock only then. The protocol goes to the
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
from .family_cases import case_for
from .kernel_abi import KernelLibrary, KernelLoadError, status_name
from .measure_request import MeasureRequest, parse_request
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


class Worker:
    """Measures the request's baseline and candidates through the family's case (family_cases.py).

    Per candidate: for each trial, fresh random inputs and NaN-poisoned, guarded outputs; every output must
    be fully written, nothing beside it touched, the inputs unchanged, and the error against the float64
    replay within the case's tolerance. The case's extra variants (e.g. attention at odd sequence lengths,
    not a multiple of any tile) are verified too, then the kernel is timed over rotating input sets.
    Baseline: every PyTorch way the case names is verified and timed; the fastest is the baseline, the
    others are reported beside it.
    """

    def __init__(self, request: MeasureRequest, proto: Protocol, device: str = "cuda:0"):
        import torch
        self.torch = torch
        self.request = request
        self.proto = proto
        self.case = case_for(request.family, request.problem)
        self.device = torch.device(device)
        self.stream = torch.cuda.current_stream()
        self.tol = self.case.tolerance()
        self.env = environment()
        self.bytes_per_set = self.case.bytes_per_set()
        self.n_sets = timing.rotation_count(self.bytes_per_set, self.env["l2_bytes"])
        set_matmul_precision(request.problem.numerics)
        self.sets = [self.case.make_timing_inputs(self.device) for _ in range(self.n_sets)]
        # Layouts the composed module may hand the kernel instead (a conv in a channels-last chain): kernel and
        # baseline are timed on them too, their inputs made once.
        self.variants = [case_for(request.family, v) for v in self.case.timed_variants()]
        self.variant_sets = [[c.make_timing_inputs(self.device) for _ in range(self.n_sets)] for c in self.variants]

    @staticmethod
    def _check(case, outputs: dict, ref: dict, buffers: dict | None = None) -> verify.Check:
        """The worst Check over the case's outputs; the first failing one if any fails."""
        worst = None
        for name, r in ref.items():
            check = verify.compare(outputs[name], r, case.tolerance(), buffers.get(name) if buffers else None)
            if not check.passed:
                check.message = f"output {name}: {check.message}"
                return check
            if worst is None or check.rel_err > worst.rel_err:
                worst = check
        return worst

    def _workspace(self, lib: KernelLibrary, arg_sets: list):
        """(tensor, bytes): one workspace for all of arg_sets, attached to each; (None, 0) for a family without.
        Handed over as 0xFF bytes: a kernel must initialize what it needs (CUTLASS initialize() does)."""
        if not self.case.has_workspace:
            return None, 0
        ws_bytes = max(lib.workspace_bytes(a) for a in arg_sets)
        workspace = self.torch.full((max(ws_bytes, 1),), 255, dtype=self.torch.uint8, device=self.device)
        for a in arg_sets:
            a.workspace, a.workspace_bytes = ctypes.c_void_p(workspace.data_ptr()), ws_bytes
        return workspace, ws_bytes

    # -- baseline -------------------------------------------------------------------------------
    def baseline(self) -> dict:
        torch, case = self.torch, self.case
        precision = precision_of(self.request.problem.numerics)
        ways, fp32_errs = [], []
        for name, fn in case.baselines():
            way = {"name": name, "status": "ok", "message": None}
            try:
                worst = None
                for _ in range(self.request.trials):
                    inp = case.make_inputs(self.device)
                    ref = case.reference(inp)
                    out = fn(inp)
                    torch.cuda.synchronize()
                    check = self._check(case, out, ref)
                    if not check.passed:
                        way.update(status="verify_failed", message=check.message)
                    if worst is None or (check.rel_err or 0) >= (worst.rel_err or 0):
                        worst = check
                    err = case.fp32_reference_err(inp, ref)
                    if err is not None:
                        fp32_errs.append(err)
                    del inp, ref, out
                timed = timing.time_launches(lambda i: fn(self.sets[i]), self.n_sets, self.request.warmup_ms,
                                             self.request.rep_ms)
                way.update(ms=timed.ms, rel_err=worst.rel_err, max_abs_err=worst.max_abs_err,
                           max_err_vs_peak=worst.max_err_vs_peak, timing=timed.to_json())
            except Exception as e:  # noqa: BLE001 - e.g. an SDPA back-end that does not take this dtype
                if not context_usable():
                    raise
                way.update(status="unavailable", message=first_line(e), ms=None)
            ways.append(way)
        timed = [w for w in ways if w.get("ms") is not None]
        if not timed:
            return {"name": "none", "status": "failed", "precision": precision,
                    "message": "no PyTorch way ran: " + "; ".join(f"{w['name']}: {w['message']}" for w in ways),
                    "alternatives": ways}
        best = min(timed, key=lambda w: w["ms"])
        out = {**best, "precision": precision, "alternatives": [w for w in ways if w is not best]}
        if self.variants:
            out["variants"] = [self._baseline_variant(c, sets) for c, sets in zip(self.variants, self.variant_sets)]
        if fp32_errs:
            out["fp32_reference_err"] = max(fp32_errs)
        return out

    def _baseline_variant(self, case, sets) -> dict:
        """The fastest of the variant's PyTorch ways, timed (the tuned problem verified the same ways)."""
        best = {"problem": case.problem.to_json(), "name": None, "ms": None}
        for name, fn in case.baselines():
            try:
                ms = timing.time_launches(lambda i: fn(sets[i]), len(sets), self.request.warmup_ms,
                                          self.request.rep_ms).ms
            except Exception as e:  # noqa: BLE001 - as in baseline(): a way that does not take this layout
                if not context_usable():
                    raise
                best.setdefault("messages", []).append(f"{name}: {first_line(e)}")
                continue
            if best["ms"] is None or ms < best["ms"]:
                best.update(name=name, ms=ms)
        return best

    def _time(self, case, lib, sets, stream_ptr):
        """(ms, kept bytes, workspace bytes) of the kernel over the rotating sets: one prebuilt argument struct
        each, one shared workspace; what the composed module keeps between calls (a weight's pre-pass copy) made
        before, as in its steady state. Raises RuntimeError naming a failing keep or the set whose run returned
        non-zero."""
        arg_sets = [lib.bind(case.kernel_args(s, stream_ptr)) for s in sets]
        try:
            kept = [case.keep_between_calls(lib, s, a) for s, a in zip(sets, arg_sets)]
        except Exception as e:  # noqa: BLE001 - said as such in the candidate's failure
            raise RuntimeError(f"keeping an operand between calls: {first_line(e)}") from e
        workspace, ws_bytes = self._workspace(lib, arg_sets)  # held until the timing is done
        refs = [ctypes.byref(a) for a in arg_sets]
        run = lib.run_fn()
        bad = []
        prepare = case.pre_kernel()  # its time counts toward the kernel's, as in the composed module

        def launch(i: int) -> None:
            if prepare is not None:
                prepare(sets[i])
            if run(refs[i]) != 0 and not bad:
                bad.append(i)

        timed = timing.time_launches(launch, len(arg_sets), self.request.warmup_ms, self.request.rep_ms)
        if bad:
            raise RuntimeError(f"run returned non-zero while timing (input set {bad[0]})")
        kept_bytes = max((k.numel() * k.element_size() for k in kept if k is not None), default=None)
        del kept, workspace
        return timed, kept_bytes, ws_bytes

    # -- candidates -----------------------------------------------------------------------------
    def candidate(self, cand) -> tuple[dict, bool]:
        """Measures one candidate; returns (result, context_lost)."""
        torch, case = self.torch, self.case
        cid = cand.id
        res = {"id": cid, "status": "ok", "ms": None, "rel_err": None, "max_abs_err": None,
               "max_err_vs_peak": None, "tolerance": self.tol, "message": None, "config": None}

        def fail(status: str, message: str, context_lost: bool = False):
            res.update(status=status, message=message)
            return res, context_lost

        try:
            lib = KernelLibrary(cand.library, cand.symbols, case.args_type, has_workspace=case.has_workspace,
                                arguments=cand.arguments)
        except KernelLoadError as e:
            return fail("load_failed", str(e))
        text = lib.describe()
        try:
            res["config"] = json.loads(text) if text else None
        except json.JSONDecodeError:
            res["config"] = text
        if cand.arguments:
            res["arguments"] = cand.arguments

        stream_ptr = self.stream.cuda_stream
        checks = [(case, self.request.trials, "")]
        checks += [(case_for(self.request.family, v), 1, f" (variant {v.to_json()})") for v in case.verify_variants()]
        worst = None
        for c, trials, label in checks:
            prepare = c.pre_kernel()
            for trial in range(trials):
                inp = c.make_inputs(self.device)
                if prepare is not None:
                    prepare(inp)  # e.g. SwiGLU's U by PyTorch, as the composed module runs it
                args = lib.bind(c.kernel_args(inp, stream_ptr))
                code = lib.can_implement(args)
                if code != 0:
                    return fail("cannot_implement", f"can_implement returned {status_name(code)}{label}")
                # The composed module's op runs a constant operand's first call without its kept copy and the
                # later ones with it: odd trials (and single-trial variants) check the kept path.
                kept = None
                if trial % 2 == 1 or trials == 1:
                    try:
                        kept = c.keep_between_calls(lib, inp, args)
                    except Exception as e:  # noqa: BLE001 - a failing prepare is the candidate's failure
                        return fail("launch_failed", f"keeping an operand between calls (trial {trial}){label}: "
                                                     f"{first_line(e)}", not context_usable())
                workspace, _ = self._workspace(lib, [args])  # sized after what is kept (it leaves B' out)
                ref = c.reference(inp)
                snapshot = verify.snapshot(c.input_tensors(inp))
                torch.cuda.synchronize()
                code = lib.run(args)
                if code != 0:
                    return fail("launch_failed", f"run returned {status_name(code)} (trial {trial}){label}")
                try:
                    torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001 - any CUDA error: decide by the context's health
                    lost = not context_usable()
                    return fail("crashed" if lost else "launch_failed",
                                f"CUDA error after run (trial {trial}){label}: {first_line(e)}", lost)
                outs = {name: view for name, (view, _) in inp.outputs.items()}
                bufs = {name: buf for name, (_, buf) in inp.outputs.items()}
                check = self._check(c, outs, ref, bufs)
                if not check.passed:
                    res.update(rel_err=check.rel_err, max_abs_err=check.max_abs_err,
                               max_err_vs_peak=check.max_err_vs_peak)
                    return fail("verify_failed", f"trial {trial}{label}: {check.message}")
                if not verify.unchanged(c.input_tensors(inp), snapshot):
                    return fail("verify_failed", f"trial {trial}{label}: the kernel modified its inputs")
                if c is case and (worst is None or check.rel_err > worst.rel_err):
                    worst = check
                del inp, ref, snapshot, workspace, kept
        res.update(rel_err=worst.rel_err, max_abs_err=worst.max_abs_err, max_err_vs_peak=worst.max_err_vs_peak)

        try:
            timed, kept_bytes, ws_bytes = self._time(case, lib, self.sets, stream_ptr)
            variants = [{"problem": c.problem.to_json(), "ms": self._time(c, lib, sets, stream_ptr)[0].ms}
                        for c, sets in zip(self.variants, self.variant_sets)]
        except Exception as e:  # noqa: BLE001 - a failing keep or launch is the candidate's failure
            lost = not context_usable()
            return fail("crashed" if lost else "launch_failed", f"while timing: {first_line(e)}", lost)
        res.update(ms=timed.ms, timing=timed.to_json())
        if variants:
            res["variants"] = variants
        if kept_bytes is not None:
            res["kept_between_calls_bytes"] = kept_bytes
        if case.has_workspace:
            res["workspace_bytes"] = ws_bytes
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
        worker = Worker(request, proto)
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
    candidates = {c.id: c for c in request.candidates}
    for cid in job.get("candidate_ids", []):
        proto.emit("start", item=cid)
        try:
            result, lost = worker.candidate(candidates[cid])
        except Exception as e:  # noqa: BLE001 - a bug here or in the candidate's host code
            traceback.print_exc()
            lost = not context_usable()
            result = {"id": cid, "status": "crashed", "message": f"exception while measuring: {first_line(e)}"}
        proto.emit("candidate", **result)
        if lost:
            return EXIT_CONTEXT_LOST
    proto.emit("done")
    return 0


def main_from_stdin() -> int:
    """The job's path from stdin; the end of stdin without one (a spare nobody needed) is a quiet exit."""
    job_path = sys.stdin.readline().strip()
    return main([job_path]) if job_path else 0


if __name__ == "__main__":
    import torch  # noqa: F401 - before the job: a worker started ahead imports it while the kernels compile
    sys.exit(main(sys.argv[1:]) if len(sys.argv) > 1 else main_from_stdin())
