"""Verification harness for a generated row-wise kernel (FactRowwiseArgs ABI, data/families/rowwise.json).

Run by `fact agent` in its own process with a time limit (a hang or a fault kills only this process):

    python -m fact.agent.verify_rowwise --fragment F.json --library K.so --id ID -o verdict.json

Per trial (the model's shape and a small odd row count): fresh random inputs (never zeros), the output
and guard rows on both sides filled with NaN, then: every output element written, guards untouched,
inputs unchanged, and max|err|/max|ref| against the fragment replayed by PyTorch in float64 within the
dtype's tolerance. Only a kernel that passes is timed (CUDA events, medians) against PyTorch's own ops,
and summarized by Nsight Compute when FACT_AGENT_NCU=1 and ncu exists.
Verdict statuses: passed, mismatch, crash, abi, no_gpu.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys

from fact.agent.fragment_replay import bytes_moved, relative_errors, replay
from fact.realize.kernel_abi import FACT_ROWWISE_MAX_INPUTS, FactRowwiseArgs, status_name
from fact.realize.timing import median_us
from fact.gpu_lock import child_env, holds_gpu

# max|err| / max|ref| allowed, by dtype. A row-wise chain in fp32 rounds each op once (sigmoid, exp and
# division ~1-2 ulp each, 2^-24 = 6e-8); 1e-5 leaves >10x margin yet catches a wrong constant, a
# dropped term or a reduction over the wrong elements. bf16/fp16: output rounding (2^-8, 2^-11) x ~4.
TOLERANCE = {"float32": 1e-5, "bfloat16": 1.6e-2, "float16": 2e-3}
GUARD_ROWS = 2


def write(path: str, verdict: dict) -> None:
    with open(path, "w") as f:
        json.dump(verdict, f, indent=1)


def load_kernel(library: str, kernel_id: str):
    lib = ctypes.CDLL(library, mode=ctypes.RTLD_LOCAL)
    run = getattr(lib, f"fact_{kernel_id}_run")
    run.restype = ctypes.c_int
    run.argtypes = [ctypes.POINTER(FactRowwiseArgs)]
    describe = getattr(lib, f"fact_{kernel_id}_describe", None)
    text = ""
    if describe is not None:
        describe.restype = ctypes.c_char_p
        raw = describe()
        text = raw.decode("utf-8", "replace") if raw else ""
    return run, text


def make_args(inputs, fragment, out_view, rows, stream) -> FactRowwiseArgs:
    a = FactRowwiseArgs()
    a.rows, a.cols, a.num_inputs = rows, fragment["cols"], len(inputs)
    for i, (spec, t) in enumerate(zip(fragment["inputs"], inputs)):
        a.inputs[i] = t.data_ptr()
        a.input_row_stride[i] = 0 if spec["broadcast"] else fragment["cols"]
    a.output = out_view.data_ptr()
    a.output_row_stride = fragment["cols"]
    a.stream = stream
    return a


def random_inputs(fragment, rows, dtype, gen):
    import torch
    cols = fragment["cols"]
    out = []
    for spec in fragment["inputs"]:
        shape = (cols,) if spec["broadcast"] else (rows, cols)
        out.append(torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype))
    return out


def trial(run, fragment, rows, dtype, seed) -> dict:
    import torch
    cols = fragment["cols"]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    inputs = random_inputs(fragment, rows, dtype, gen)
    saved = [t.clone() for t in inputs]
    buf = torch.full(((rows + 2 * GUARD_ROWS) * cols,), float("nan"), device="cuda", dtype=dtype)
    out = buf[GUARD_ROWS * cols:(GUARD_ROWS + rows) * cols].view(rows, cols)
    args = make_args(inputs, fragment, out, rows, torch.cuda.current_stream().cuda_stream)
    rc = run(ctypes.byref(args))
    if rc != 0:
        return {"status": "abi", "message": f"fact_run returned {status_name(rc)} for rows={rows}, cols={cols}",
                "launch_status": rc, "shape": [rows, cols]}
    torch.cuda.synchronize()
    ref = replay(fragment, [t.double() for t in inputs]).reshape(rows, cols)
    guard_ok = bool(torch.isnan(buf[:GUARD_ROWS * cols]).all() and torch.isnan(buf[(GUARD_ROWS + rows) * cols:]).all())
    unwritten = int((torch.isnan(out) & ~torch.isnan(ref)).sum())
    changed = [i for i, (a, b) in enumerate(zip(inputs, saved)) if not torch.equal(a, b)]
    errs = relative_errors(out.nan_to_num(nan=float("inf")), ref)
    torch_errs = relative_errors(replay(fragment, inputs).reshape(rows, cols), ref)
    tol = TOLERANCE[fragment["dtype"]]
    rec = {"shape": [rows, cols], "tolerance": tol, "pytorch_max_rel_err": torch_errs["max_rel_err"],
           "unwritten": unwritten, "out_of_bounds": not guard_ok, "inputs_changed": changed, **errs}
    problems = []
    if unwritten:
        problems.append(f"{unwritten} output elements never written")
    if not guard_ok:
        problems.append("the kernel wrote outside the output (guard rows changed)")
    if changed:
        problems.append(f"inputs {changed} were modified")
    if not problems and not errs["max_rel_err"] <= tol:
        r, c = errs["worst_element"]
        problems.append(f"max|err|/max|ref| = {errs['max_rel_err']:.3g} > {tol:g} (worst at row {r}, col {c}: "
                        f"got {float(out[r, c]):.6g}, expected {float(ref[r, c]):.6g}); PyTorch's own is "
                        f"{torch_errs['max_rel_err']:.3g}")
    rec["status"] = "mismatch" if problems else "passed"
    rec["message"] = "; ".join(problems) if problems else (
        f"rows={rows}: max|err|/max|ref| {errs['max_rel_err']:.3g} <= {tol:g} (PyTorch {torch_errs['max_rel_err']:.3g})")
    return rec


def profile(run, fragment, dtype) -> dict:
    import torch
    rows, cols = fragment["rows"], fragment["cols"]
    gen = torch.Generator(device="cuda").manual_seed(7)
    inputs = random_inputs(fragment, rows, dtype, gen)
    out = torch.empty(rows, cols, device="cuda", dtype=dtype)
    args = make_args(inputs, fragment, out, rows, torch.cuda.current_stream().cuda_stream)
    ref_args = ctypes.byref(args)
    kernel_us = median_us(lambda: run(ref_args))
    torch_us = median_us(lambda: replay(fragment, inputs))
    nbytes = bytes_moved(fragment, rows, out.element_size())
    return {"kernel_us": kernel_us, "pytorch_us": torch_us, "speedup": torch_us / kernel_us,
            "bytes_min": nbytes, "kernel_gb_per_s": nbytes / kernel_us * 1e-3, "shape": [rows, cols],
            "method": "CUDA events, median of 25 after 5 warm-up runs; PyTorch = the fragment's ATen ops eager"}


def ncu_summary(argv) -> dict:
    """One launch under Nsight Compute: duration, DRAM and SM throughput (percent of peak)."""
    ncu = shutil.which("ncu")
    if not ncu or os.environ.get("FACT_AGENT_NCU") != "1":
        return {}
    metrics = "gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed," \
              "sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread"
    cmd = [ncu, "--csv", "--metrics", metrics, "--kernel-name", "regex:^(?!.*(elementwise|reduce|distribution)).*",
           "--launch-count", "1", sys.executable, "-m", "fact.agent.verify_rowwise", *argv, "--launch-once"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=child_env())
    except subprocess.TimeoutExpired:
        return {"ncu": "timed out after 60 s"}
    rows = [line for line in r.stdout.splitlines() if line.startswith('"')]
    summary = {}
    for line in rows[1:]:
        cells = [c.strip('"') for c in line.split('","')]
        if len(cells) >= 3:
            summary[cells[-3]] = f"{cells[-1]} {cells[-2]}".strip()
    return {"ncu": summary or ("ncu gave no metrics: " + (r.stderr or r.stdout)[-400:])}


@holds_gpu
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fragment", required=True)
    p.add_argument("--library", required=True)
    p.add_argument("--id", required=True)
    p.add_argument("--numerics", default="")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--launch-once", action="store_true", help="one launch at the model's shape (for ncu)")
    a = p.parse_args(argv)
    with open(a.fragment) as f:
        fragment = json.load(f)
    if len(fragment["inputs"]) > FACT_ROWWISE_MAX_INPUTS:
        write(a.output, {"status": "abi", "message": f"{len(fragment['inputs'])} inputs > {FACT_ROWWISE_MAX_INPUTS}"})
        return 0
    try:
        run, describe = load_kernel(a.library, a.id)
    except (OSError, AttributeError) as e:
        write(a.output, {"status": "abi", "message": f"cannot load fact_{a.id}_run from the library: {e}"})
        return 0
    import torch
    if not torch.cuda.is_available():
        write(a.output, {"status": "no_gpu", "message": "no CUDA GPU here (torch.cuda.is_available() is False)",
                         "describe": describe})
        return 0
    dtype = getattr(torch, fragment["dtype"])
    if a.launch_once:
        inputs = random_inputs(fragment, fragment["rows"], dtype, torch.Generator(device="cuda").manual_seed(1))
        out = torch.empty(fragment["rows"], fragment["cols"], device="cuda", dtype=dtype)
        run(ctypes.byref(make_args(inputs, fragment, out, fragment["rows"], torch.cuda.current_stream().cuda_stream)))
        torch.cuda.synchronize()
        return 0
    verdict = {"status": "passed", "describe": describe, "device": torch.cuda.get_device_name(), "trials": []}
    # The model's row count, then a small odd one (a kernel that assumes a multiple of its tile fails there).
    for seed, rows in enumerate([fragment["rows"], min(fragment["rows"], 37)]):
        try:
            rec = trial(run, fragment, rows, dtype, seed)
        except RuntimeError as e:  # CUDA fault: the context is gone; report and stop
            verdict.update(status="crash", message=f"CUDA error at rows={rows}: {str(e)[:500]}")
            write(a.output, verdict)
            return 0
        verdict["trials"].append(rec)
        if rec["status"] != "passed":
            verdict.update({k: v for k, v in rec.items() if k != "status"}, status=rec["status"])
            write(a.output, verdict)
            return 0
    first = verdict["trials"][0]
    verdict.update(tolerance=first["tolerance"], max_rel_err=max(t["max_rel_err"] for t in verdict["trials"]),
                   rel_fro_err=max(t["rel_fro_err"] for t in verdict["trials"]))
    verdict["profile"] = profile(run, fragment, dtype)
    verdict.update(ncu_summary(["--fragment", a.fragment, "--library", a.library, "--id", a.id, "-o", os.devnull]))
    pr = verdict["profile"]
    verdict["message"] = (f"max|err|/max|ref| {verdict['max_rel_err']:.3g} <= {first['tolerance']:g} on "
                          f"{len(verdict['trials'])} shapes; {pr['kernel_us']:.1f} us vs PyTorch {pr['pytorch_us']:.1f} us "
                          f"({pr['speedup']:.2f}x, {pr['kernel_gb_per_s']:.0f} GB/s)")
    write(a.output, verdict)
    return 0


if __name__ == "__main__":
    sys.exit(main())
