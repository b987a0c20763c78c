"""The measuring worker's one path for every family, run on the CPU. The worker's CUDA calls are stood in for
(synchronize, the stream, the device description, the timing loop) and the candidates are small C libraries
exporting the kernel ABI that compute on host memory (data/cpu_kernels), so GEMM (its workspace, SwiGLU's U
computed by PyTorch first, the fp32 reference error) and normalization (its odd-row variant) go through the
same verify-and-time code the GPU runs. Timings here are the stand-in's; the GPU run is test_measure.py's."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from fact.realize import measure_worker, timing
from fact.realize.measure_request import Candidate, parse_request

KERNELS = Path(__file__).resolve().parent / "data" / "cpu_kernels"
GEMM = {"m": 24, "n": 40, "k": 56, "batch": 2, "dtype": "float32", "epilogue": "bias"}
NORM = {"kind": "rms_norm", "rows": 64, "cols": 96, "has_weight": True, "eps": 1e-5, "dtype": "float32"}
STAND_IN_MS = 0.5


@pytest.fixture
def build(tmp_path, kernel_abi_include):
    """build(source, id, *defines) -> the candidate {"id", "library"} of a C stand-in kernel."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler (gcc/cc) on PATH to build the CPU stand-in kernels")

    def compile_kernel(source: str, kernel_id: str, *defines: str) -> dict:
        so = tmp_path / f"{kernel_id}.so"
        subprocess.run([gcc, "-O1", "-shared", "-fPIC", "-I", str(kernel_abi_include),
                        f"-DFACT_ID={kernel_id}", *defines, str(KERNELS / source), "-o", str(so), "-lm"], check=True)
        return {"id": kernel_id, "library": str(so)}
    return compile_kernel


@pytest.fixture
def worker(monkeypatch):
    """worker(request JSON) -> a measure_worker.Worker on the CPU; worker.timed lists the sets each timing swept."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a, **k: SimpleNamespace(cuda_stream=0))
    monkeypatch.setattr(measure_worker, "environment", lambda: {"device": "CPU stand-in", "l2_bytes": 1 << 16})
    monkeypatch.setattr(measure_worker, "context_usable", lambda: True)
    timed = []

    def time_launches(launch, n_sets, warmup_ms, rep_ms):
        for i in range(n_sets):
            launch(i)
        timed.append(n_sets)
        return timing.Timing(ms=STAND_IN_MS, p20_ms=STAND_IN_MS, p80_ms=STAND_IN_MS, samples=1,
                             launches_per_sample=n_sets)

    monkeypatch.setattr(timing, "time_launches", time_launches)

    def make(request: dict):
        w = measure_worker.Worker(parse_request(request), proto=None, device="cpu")
        w.timed = timed
        return w
    return make


def measured(w, candidate: dict) -> dict:
    result, lost = w.candidate(Candidate(**candidate))
    assert not lost
    return result


def test_a_run_time_variant_calls_its_kernels_symbols_with_its_own_fields(build, worker):
    # Two variants of one built kernel (fact_kern_*): each sets its own swizzle on every call, verification and
    # timing alike; the kernel here takes only swizzle 4.
    kernel = build("gemm_cpu_abi.c", "kern", "-DFACT_SWIZZLE=4")
    w = worker({"family": "gemm", "problem": GEMM, "trials": 2})
    good = measured(w, {"id": "v4", "library": kernel["library"], "kernel": "kern", "arguments": {"swizzle": 4}})
    assert good["status"] == "ok", good["message"]
    assert good["arguments"] == {"swizzle": 4} and w.timed == [w.n_sets]
    other = measured(w, {"id": "v2", "library": kernel["library"], "kernel": "kern", "arguments": {"swizzle": 2}})
    assert other["status"] == "cannot_implement"
    missing = measured(w, {"id": "v4", "library": kernel["library"]})  # the symbols are fact_kern_*, not fact_v4_*
    assert missing["status"] == "load_failed" and "fact_v4_" in missing["message"]
    unknown = measured(w, {"id": "v4", "library": kernel["library"], "kernel": "kern", "arguments": {"swizle": 4}})
    assert unknown["status"] == "load_failed" and "swizle" in unknown["message"]


def test_gemm_candidates_go_through_the_shared_path(build, worker):
    w = worker({"family": "gemm", "problem": GEMM, "trials": 2})
    assert w.n_sets >= 2 and len(w.sets) == w.n_sets
    good = measured(w, build("gemm_cpu_abi.c", "good"))
    assert good["status"] == "ok", good["message"]
    assert good["ms"] == STAND_IN_MS and w.timed == [w.n_sets]
    assert 0 < good["rel_err"] < good["tolerance"] and good["config"] == {"kernel": "cpu stand-in"}
    # The kernel refuses to run without its workspace: the worker attached one in verification and timing.
    assert good["workspace_bytes"] == 256
    faults = {"unwritten": ("-DFACT_BUG=1", "verify_failed", "not written"),
              "writes_a": ("-DFACT_BUG=2", "verify_failed", "modified its inputs"),
              "refuses": ("-DFACT_BUG=3", "cannot_implement", "FACT_ERR_SHAPE")}
    for kid, (define, status, needle) in faults.items():
        r = measured(w, build("gemm_cpu_abi.c", kid, define))
        assert r["status"] == status and needle in r["message"], (kid, r)
    missing = measured(w, {"id": "absent", "library": "/nonexistent/absent.so"})
    assert missing["status"] == "load_failed" and "no such file" in missing["message"]


def test_swiglu_candidate_reads_u_computed_by_pytorch_first(build, worker):
    w = worker({"family": "gemm", "problem": {**GEMM, "epilogue": "bias_silu_mul"}, "trials": 1})
    r = measured(w, build("gemm_cpu_abi.c", "swiglu", "-DFACT_SWIGLU=1"))
    assert r["status"] == "ok", r["message"]  # without U in the residual slot its output would be NaN


def test_gemm_baseline_keeps_its_fields(worker):
    w = worker({"family": "gemm", "problem": GEMM, "trials": 2})
    b = w.baseline()
    assert b["status"] == "ok" and b["name"] == "torch.matmul (cuBLAS) + PyTorch epilogue ops"
    assert b["precision"] == "highest" and b["ms"] == STAND_IN_MS and b["alternatives"] == []
    assert 0 < b["rel_err"] < w.tol and 0 < b["fp32_reference_err"] < 1e-5


def test_norm_candidates_and_baseline_through_the_same_worker(build, worker):
    w = worker({"family": "normalization", "problem": NORM, "trials": 2})
    good = measured(w, build("norm_cpu_abi.c", "norm_good"))
    assert good["status"] == "ok", good["message"]
    assert "workspace_bytes" not in good  # a family without a workspace reports none
    # Rows 64 are whole blocks of 8; only the odd-row variant (37 rows) shows the writes past the last row.
    ragged = measured(w, build("norm_cpu_abi.c", "norm_ragged", "-DFACT_BUG=1"))
    assert ragged["status"] == "verify_failed"
    assert "(variant" in ragged["message"] and "outside" in ragged["message"], ragged["message"]
    b = w.baseline()
    assert b["status"] == "ok" and len(b["alternatives"]) == 1 and "fp32_reference_err" not in b


def test_timed_variants_are_timed_beside_the_problem_for_kernel_and_baseline(build, worker, monkeypatch):
    # A case's timed variant (a conv's channels-last layout; here the norm's odd-row problem stands in): each
    # candidate and the baseline are timed on it too, over sets of its own, and report it beside their own time.
    from fact.realize.norm_case import NormCase
    monkeypatch.setattr(NormCase, "timed_variants", lambda self: self.verify_variants())
    w = worker({"family": "normalization", "problem": NORM, "trials": 1})
    (variant,) = w.variants
    assert len(w.variant_sets) == 1 and len(w.variant_sets[0]) == w.n_sets
    good = measured(w, build("norm_cpu_abi.c", "norm_good"))
    assert good["status"] == "ok", good["message"]
    assert good["variants"] == [{"problem": variant.problem.to_json(), "ms": STAND_IN_MS}]
    assert w.timed == [w.n_sets, w.n_sets], "the problem's sets, then the variant's"
    b = w.baseline()
    assert [v["problem"] for v in b["variants"]] == [variant.problem.to_json()] and b["variants"][0]["ms"] == STAND_IN_MS
    ragged = measured(w, build("norm_cpu_abi.c", "norm_ragged", "-DFACT_BUG=1"))
    assert ragged["status"] == "verify_failed" and "variants" not in ragged, "a variant is verified before it is timed"
