"""The measuring worker for kernel families besides GEMM (normalization, attention, rope), run by
measure_worker.main when request.family names one. Same protocol, isolation and timing as the GEMM
worker; what is family-specific (inputs, argument struct, float64 replay, PyTorch's ways) comes from the
family's case (family_cases.py).

Per candidate: for each trial, fresh random inputs and NaN-poisoned, guarded outputs; every output must be
fully written, nothing beside it touched, the inputs unchanged, and the error against the float64 replay
within the case's tolerance. The case's extra variants (e.g. attention at odd sequence lengths, not a
multiple of any tile) are verified too, then the kernel is timed over rotating input sets.
Baseline: every PyTorch way the case names is verified and timed; the fastest is the baseline, the
others are reported beside it.
"""
from __future__ import annotations

import ctypes
import json

from . import timing, verify
from .family_cases import case_for
from .kernel_abi import KernelLibrary, KernelLoadError, status_name
from .measure_request import MeasureRequest
from .measure_worker import context_usable, environment, first_line, precision_of, set_matmul_precision


class FamilyWorker:
    def __init__(self, request: MeasureRequest, proto):
        import torch
        self.torch = torch
        self.request = request
        self.proto = proto
        self.case = case_for(request.family, request.problem)
        self.device = torch.device("cuda", 0)
        self.stream = torch.cuda.current_stream()
        self.tol = self.case.tolerance()
        self.env = environment()
        self.bytes_per_set = self.case.bytes_per_set()
        self.n_sets = timing.rotation_count(self.bytes_per_set, self.env["l2_bytes"])
        set_matmul_precision(request.problem.numerics)
        self.sets = [self.case.make_inputs(self.device) for _ in range(self.n_sets)]

    def _check(self, case, outputs: dict, ref: dict, buffers: dict | None = None):
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

    # -- baseline -------------------------------------------------------------------------------
    def baseline(self) -> dict:
        torch = self.torch
        ways = []
        for name, fn in self.case.baselines():
            way = {"name": name, "status": "ok", "message": None}
            try:
                worst = None
                for _ in range(self.request.trials):
                    inp = self.case.make_inputs(self.device)
                    ref = self.case.reference(inp)
                    out = fn(inp)
                    torch.cuda.synchronize()
                    check = self._check(self.case, out, ref)
                    if not check.passed:
                        way.update(status="verify_failed", message=check.message)
                    if worst is None or (check.rel_err or 0) >= (worst.rel_err or 0):
                        worst = check
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
            return {"name": "none", "status": "failed", "precision": precision_of(self.request.problem.numerics),
                    "message": "no PyTorch way ran: " + "; ".join(f"{w['name']}: {w['message']}" for w in ways),
                    "alternatives": ways}
        best = min(timed, key=lambda w: w["ms"])
        return {**best, "precision": precision_of(self.request.problem.numerics),
                "alternatives": [w for w in ways if w is not best]}

    # -- candidates -----------------------------------------------------------------------------
    def candidate(self, cid: str, library: str) -> tuple[dict, bool]:
        torch = self.torch
        res = {"id": cid, "status": "ok", "ms": None, "rel_err": None, "max_abs_err": None,
               "max_err_vs_peak": None, "tolerance": self.tol, "message": None, "config": None}

        def fail(status: str, message: str, context_lost: bool = False):
            res.update(status=status, message=message)
            return res, context_lost

        try:
            lib = KernelLibrary(library, cid, self.case.args_type, has_workspace=self.case.has_workspace)
        except KernelLoadError as e:
            return fail("load_failed", str(e))
        text = lib.describe()
        try:
            res["config"] = json.loads(text) if text else None
        except json.JSONDecodeError:
            res["config"] = text

        stream_ptr = self.stream.cuda_stream
        checks = [(self.case, self.request.trials, "")]
        checks += [(case_for(self.request.family, v), 1, f" (variant {v.to_json()})") for v in self.case.verify_variants()]
        worst = None
        for case, trials, label in checks:
            for trial in range(trials):
                inp = case.make_inputs(self.device)
                args = case.kernel_args(inp, stream_ptr)
                code = lib.can_implement(args)
                if code != 0:
                    return fail("cannot_implement", f"can_implement returned {status_name(code)}{label}")
                ref = case.reference(inp)
                snapshot = [t.clone() for t in case.input_tensors(inp)]
                torch.cuda.synchronize()
                code = lib.run(args)
                if code != 0:
                    return fail("launch_failed", f"run returned {status_name(code)} (trial {trial}){label}")
                try:
                    torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001
                    lost = not context_usable()
                    return fail("crashed" if lost else "launch_failed",
                                f"CUDA error after run (trial {trial}){label}: {first_line(e)}", lost)
                outs = {name: view for name, (view, _) in inp.outputs.items()}
                bufs = {name: buf for name, (_, buf) in inp.outputs.items()}
                check = self._check(case, outs, ref, bufs)
                if not check.passed:
                    res.update(rel_err=check.rel_err, max_abs_err=check.max_abs_err,
                               max_err_vs_peak=check.max_err_vs_peak)
                    return fail("verify_failed", f"trial {trial}{label}: {check.message}")
                if not all(torch.equal(a, b) for a, b in zip(case.input_tensors(inp), snapshot)):
                    return fail("verify_failed", f"trial {trial}{label}: the kernel modified its inputs")
                if case is self.case and (worst is None or check.rel_err > worst.rel_err):
                    worst = check
                del inp, ref, snapshot
        res.update(rel_err=worst.rel_err, max_abs_err=worst.max_abs_err, max_err_vs_peak=worst.max_err_vs_peak)

        arg_sets = [self.case.kernel_args(s, stream_ptr) for s in self.sets]
        refs = [ctypes.byref(a) for a in arg_sets]
        run = lib.run_fn()
        bad = []

        def launch(i: int) -> None:
            if run(refs[i]) != 0 and not bad:
                bad.append(i)

        try:
            timed = timing.time_launches(launch, len(arg_sets), self.request.warmup_ms, self.request.rep_ms)
        except Exception as e:  # noqa: BLE001
            lost = not context_usable()
            return fail("crashed" if lost else "launch_failed", f"while timing: {first_line(e)}", lost)
        if bad:
            return fail("launch_failed", f"run returned non-zero while timing (input set {bad[0]})")
        res.update(ms=timed.ms, timing=timed.to_json())
        return res, False
