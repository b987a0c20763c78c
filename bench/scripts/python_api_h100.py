"""The Python entry points against the CLI on the device (issue: FACT from Python), one model after another:

    python bench/scripts/python_api_h100.py --out DIR [--numerics tf32] [--top 1] MODEL.py [MODEL.py ...]

Per model (a KernelBench-style file, built as `fact optimize` builds it):
  1. fact.optimize(model, inputs) with a fresh tuning database (cold), its wall time;
  2. `fact optimize MODEL.py` (the installed console script) on the same database (warm for the CLI);
  3. fact.optimize again: once taking the verified result of step 1 (reuse), once running the pipeline again on
     the warm database (reuse=False), their wall times;
  4. torch.compile(model, backend="fact") and torch.compile(model) (default), first-call times;
then, in this one process and numerics mode, eager, the CLI's composed module (its ModelNew with the model's
weights), fact.optimize's module, backend="fact" and torch.compile timed in interleaved rounds
(fact.compose.e2e_check.interleaved_ms), each checked against eager (KernelBench's 1e-2) and against a float64 run.
Writes DIR/python_api.json after each model (a model cut off by the time limit keeps the ones before it).
"""
from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import shutil
import subprocess
import time
import traceback
from pathlib import Path

import torch

import fact
from fact.api import dynamo_backend
from fact.api.optimized_module import load_composed
from fact.compose.e2e_check import PRECISION, compare, interleaved_ms, rel_err
from fact.problem import instantiate, load_problem


def timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return value, round(time.perf_counter() - t0, 2)


def cli_run(path: Path, out: Path, args) -> dict:
    cmd = ["fact", "optimize", str(path), "--out", str(out), "--top", str(args.top), "--db", str(args.db),
           "--no-max-autotune", "--no-compile-baselines"] + (["--numerics", args.numerics] if args.numerics else [])
    r, seconds = timed(lambda: subprocess.run(cmd, capture_output=True, text=True, timeout=args.step_timeout))
    (out.parent / f"{out.name}.log").write_text(r.stdout + r.stderr)
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").is_file() else {}
    return {"exit": r.returncode, "seconds": seconds, "e2e": report.get("e2e"),
            "fact_ops": [p["op"] for p in report.get("patterns", []) if p.get("accepted")]}


def composed_module(folder: Path, model: torch.nn.Module) -> torch.nn.Module:
    module = load_composed(folder)
    new = module.ModelNew(*module.get_init_inputs()).to("cuda").eval()
    new.load_state_dict(model.state_dict())
    return new


def check(variants: dict, inputs, model) -> dict:
    """Each variant against eager (1e-2, KernelBench) and against the model in float64."""
    with torch.no_grad():
        ref = copy.deepcopy(model).double()(*[x.double() if x.is_floating_point() else x for x in inputs])
        want = model(*inputs)
        out = {}
        for name, fn in variants.items():
            got = fn(*inputs)
            close, worst = compare(got, want)
            out[name] = {"correct": close, "max_abs_diff": worst, "rel_err": rel_err(got, ref)}
    return out


def run_model(path: Path, args, work: Path, row: dict, save) -> None:
    """Fills `row` step by step, calling save() after each (a run cut off keeps what it measured)."""
    problem = load_problem(path)
    model, inputs, _ = instantiate(problem, "cuda")
    model = model.to("cuda").eval()
    inputs = [x.to("cuda") if isinstance(x, torch.Tensor) else x for x in inputs]
    options = dict(numerics=args.numerics, top=args.top, tuning_db=str(args.db), cache_dir=str(work / "cache"),
                   progress=False)
    variants = {"eager": model}
    if not args.backend_only:
        optimize_steps(path, args, work, row, save, model, inputs, options, variants)
    torch._dynamo.reset()
    before = len(dynamo_backend.decisions)
    backend = torch.compile(model, backend="fact", options={k: v for k, v in options.items() if k != "progress"})
    with torch.no_grad():
        _, row["backend_first_call_s"] = timed(lambda: backend(*inputs))
    row["backend_graphs"] = dynamo_backend.decisions[before:]
    save()
    default = torch.compile(model)
    with torch.no_grad():
        _, row["compile_first_call_s"] = timed(lambda: default(*inputs))
    variants.update(backend_fact=backend, compile_default=default)
    row["checks"] = check(variants, inputs, model)
    save()
    with torch.no_grad():
        row["ms"] = interleaved_ms(variants, inputs, rounds=args.rounds, target_batch_ms=args.target_batch_ms)
    ms = row["ms"]
    row["optimize_vs_cli"] = ms["cli_composed"] / ms["optimize"] if "cli_composed" in ms else None
    row["backend_vs_cli"] = ms["cli_composed"] / ms["backend_fact"] if "cli_composed" in ms else None
    row["backend_vs_compile"] = ms["compile_default"] / ms["backend_fact"]
    row["optimize_vs_eager"] = ms["eager"] / ms["optimize"] if "optimize" in ms else None
    save()


def optimize_steps(path: Path, args, work: Path, row: dict, save, model, inputs, options: dict, variants: dict):
    """fact.optimize cold, the CLI on the warm database, fact.optimize reusing and re-running; adds the modules."""
    optimized, row["optimize_cold_s"] = timed(lambda: fact.optimize(model, tuple(inputs), **options))
    row["fact_ops"] = optimized.report.fact_ops
    row["report"] = {k: optimized.report.get(k) for k in ("e2e", "numerics", "process", "left_to_pytorch")}
    (args.out / f"{path.stem}.optimize_report.md").write_text(str(optimized.report))  # what ran where, and why
    save()
    row["cli"] = cli_run(path, work / "cli", args)
    save()
    _, row["optimize_reuse_s"] = timed(lambda: fact.optimize(model, tuple(inputs), **options))
    rerun, row["optimize_warm_db_s"] = timed(lambda: fact.optimize(model, tuple(inputs), reuse=False, **options))
    row["warm_db_fact_ops"] = rerun.report.fact_ops
    save()
    variants["optimize"] = optimized
    if row["cli"]["exit"] == 0:
        variants["cli_composed"] = composed_module(work / "cli" / "composed", model)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--numerics", default="tf32")
    ap.add_argument("--top", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--step-timeout", type=int, default=540)
    # Batches of several back-to-back calls: a 3.5 ms module timed one call at a time measures its host-side launch
    # path too (two builds of one Inductor graph measured 2% apart that way on GPT-2).
    ap.add_argument("--target-batch-ms", type=float, default=25.0)
    ap.add_argument("--backend-only", action="store_true",
                    help="time eager, backend='fact' and torch.compile only (a re-run of the backend's figures)")
    ap.add_argument("--db-from", type=Path, help="start from this tuning database (a copy)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    args.db = args.out / "tuning.sqlite"
    if args.db_from and args.db_from.is_file():
        shutil.copy2(args.db_from, args.db)
    torch.set_float32_matmul_precision(PRECISION[args.numerics or "fp32"])
    doc = {"format": "fact-python-api-bench", "version": 1, "date": dt.date.today().isoformat(),
           "device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "float32_matmul_precision": torch.get_float32_matmul_precision(), "top": args.top,
           "target_batch_ms": args.target_batch_ms, "models": []}
    def save():
        (args.out / "python_api.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")

    for i, path in enumerate(args.models):
        row = {"model": str(path), "numerics": args.numerics or "default"}
        doc["models"].append(row)
        try:
            run_model(path, args, Path("/tmp/fact-python-api") / str(i), row, save)
        except Exception as e:  # noqa: BLE001 - a failure is a row of its own, the next model still runs
            row.update(error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
        save()
        print(json.dumps({k: row.get(k) for k in ("model", "error", "optimize_cold_s", "optimize_reuse_s",
                                                    "optimize_warm_db_s", "ms", "optimize_vs_cli", "backend_vs_cli",
                                                    "backend_vs_compile", "fact_ops")}, default=str), flush=True)


if __name__ == "__main__":
    main()
