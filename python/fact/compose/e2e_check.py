"""End-to-end check of a composed module (`fact compose` output) against the user's Model.

KernelBench's rule (fresh random inputs each trial, atol = rtol = 1e-2) plus the relative error of both
modules against a float64 run of the original, then the time of each (CUDA events, medians), all under
one numerics setting. On a GPU the composed module's ops come from the op library (--lib); on a CPU
(--reference) from FACT's reference ops.

Usage: python -m fact.compose.e2e_check COMPOSED_DIR [--lib libfact_ops.so | --reference]
                                         [--numerics tf32] [--trials 5] [-o result.json]
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch

PRECISION = {"fp32": "highest", "3xtf32": "highest", "tf32": "high"}


def load_composed(folder: Path):
    spec = importlib.util.spec_from_file_location("fact_composed_model", folder / "model_new.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    return float((x.double() - ref).norm() / ref.norm())


def median_ms(fn, inputs, iters: int) -> float:
    for _ in range(3):
        fn(*inputs)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("composed", type=Path)
    ap.add_argument("--lib", help="op library to load (GPU)")
    ap.add_argument("--reference", action="store_true", help="use FACT's CPU reference ops instead of a library")
    ap.add_argument("--numerics", default="tf32", choices=sorted(PRECISION))
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("-o", "--output")
    args = ap.parse_args()

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    if args.lib:
        torch.ops.load_library(args.lib)
    elif args.reference:
        from fact.compose.reference_ops import register_reference_ops
        register_reference_ops(args.composed / "manifest.json")
    else:
        print("e2e_check: give --lib (GPU op library) or --reference (CPU reference ops)", file=sys.stderr)
        return 2
    torch.set_float32_matmul_precision(PRECISION[args.numerics])
    mod = load_composed(args.composed)
    torch.manual_seed(0)
    init = mod.get_init_inputs()
    original = mod.Model(*init).to(device).eval()
    composed = mod.ModelNew(*init).to(device).eval()
    composed.load_state_dict(original.state_dict(), strict=True)
    reference64 = copy.deepcopy(original).double()

    trials = []
    with torch.no_grad():
        for t in range(args.trials):
            torch.manual_seed(1000 + t)  # fresh inputs every trial
            inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
            ref = reference64(*[x.double() if isinstance(x, torch.Tensor) else x for x in inputs])
            out_o, out_c = original(*inputs), composed(*inputs)
            trials.append({"allclose_1e-2": bool(torch.allclose(out_c, out_o, atol=1e-2, rtol=1e-2)),
                           "max_abs_diff": float((out_c - out_o).abs().max()),
                           "rel_err_composed": rel_err(out_c, ref), "rel_err_original": rel_err(out_o, ref)})
            del ref
        timing = {}
        if cuda:
            inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
            timing = {"eager_ms": median_ms(original, inputs, args.iters),
                      "composed_ms": median_ms(composed, inputs, args.iters)}
            timing["speedup"] = timing["eager_ms"] / timing["composed_ms"]
    result = {"device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
              "numerics": args.numerics, "float32_matmul_precision": PRECISION[args.numerics],
              "correct": all(t["allclose_1e-2"] for t in trials), "trials": trials, **timing}
    text = json.dumps(result, indent=1)
    if args.output:
        Path(args.output).write_text(text + "\n")
    print(text)
    return 0 if result["correct"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
