"""Merges the per-problem `fact tune --report` files of a device run into bench/results/gemm_h100.json
and a Markdown table beside it (device, date, commit, torch, CUTLASS, numerics per row).

Usage: python bench/scripts/gemm_report.py OUT_DIR... [--out bench/results/gemm_h100] [--merge-into RESULTS] [--note TEXT]
Each OUT_DIR holds gemm_work*.tgz (or an unpacked work/ folder) from bench/scripts/gemm_h100.sh (or
fused_h100.sh); for a problem and numerics measured in several runs, the last OUT_DIR given wins.
--merge-into bench/results/fused_h100 keeps that file's rows of other (problem, numerics, pattern) keys
and writes the merged table there (RESULTS.json and RESULTS.md) instead of --out.
"""
from __future__ import annotations

import argparse
import json
import tarfile
import tempfile
from pathlib import Path

import results_table

# The tuner's gate, reapplied here so rows measured by older binaries follow today's rule.
WIN_MARGIN = results_table.WIN_MARGIN
# The baseline each FACT numerics mode is compared with (same numerics, PyTorch/cuBLAS).
BASELINE = {"fp32": "cuBLAS fp32", "3xtf32": "cuBLAS fp32", "tf32": "cuBLAS tf32", "bf16": "cuBLAS bf16", "fp16": "cuBLAS fp16"}


def tune_reports(out_dir: Path, scratch: Path) -> list[Path]:
    archives = sorted(out_dir.glob("gemm_work*.tgz"))
    if not archives:
        return sorted(out_dir.glob("work/tune-*.json"))
    found = []
    for i, tgz in enumerate(archives):
        dest = scratch / out_dir.name / str(i)
        with tarfile.open(tgz) as t:
            t.extractall(dest, filter="data")
        found += sorted(dest.glob("work/tune-*.json"))
    return found


def environment(out_dir: Path, scratch: Path) -> dict:
    for res in sorted((scratch / out_dir.name).glob("**/work/measure-*-result.json")):
        d = json.loads(res.read_text())
        env = d.get("environment") or {}
        return {"device": d.get("device"), "torch": d.get("torch") or env.get("torch"), "cuda": d.get("cuda") or env.get("cuda")}
    return {}


def row_of(problem: str, report: dict, r: dict) -> dict:
    numerics = report["numerics"]
    cfg = r.get("config")
    fact_ms, base_ms = r.get("fact_ms"), r.get("baseline_ms")
    used = bool(cfg) and fact_ms is not None and base_ms is not None and fact_ms < base_ms * (1 - WIN_MARGIN)
    # 3xtf32 promises fp32 accuracy: at most twice cuBLAS fp32's own error against float64.
    accuracy_ok = None
    if numerics == "3xtf32" and r.get("rel_err") is not None and r.get("baseline_rel_err") is not None:
        accuracy_ok = r["rel_err"] <= 2 * r["baseline_rel_err"]
    return {
        "problem": problem,
        "pattern": r.get("pattern"),
        "numerics": numerics,
        # Plain GEMMs compare with cuBLAS; fused patterns with cuBLAS plus PyTorch's epilogue ops.
        "baseline": BASELINE.get(numerics, "cuBLAS") + (" + PyTorch epilogue" if "epilogue" in (r.get("baseline") or "") else ""),
        "baseline_ms": r.get("baseline_ms"),
        "fact_ms": r.get("fact_ms"),
        # A row where PyTorch won keeps PyTorch (speedup 1.0 for the composed module); the best
        # CUTLASS time is still reported in fact_ms and its ratio in cutlass_vs_baseline.
        "speedup": (base_ms / fact_ms) if used else 1.0,
        "cutlass_vs_baseline": (r["baseline_ms"] / r["fact_ms"]) if r.get("baseline_ms") and r.get("fact_ms") else None,
        "kept": "fact" if used else "pytorch",
        "fp32_accuracy_target_met": accuracy_ok,
        "status": r.get("status"),
        "rel_err": r.get("rel_err"),
        "baseline_rel_err": r.get("baseline_rel_err"),
        "fp32_reference_err": r.get("fp32_reference_err"),
        "config": cfg if cfg else (r.get("winner") or None),
        "candidates": r.get("candidates"),
        "verified": r.get("verified"),
        "tune_seconds": r.get("seconds"),
        "message": r.get("message"),
    }


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dirs", nargs="+", type=Path)
    ap.add_argument("--out", default="bench/results/gemm_h100")
    ap.add_argument("--merge-into", default=None, help="results file (without suffix) whose other rows are kept")
    ap.add_argument("--note", default=None, help="how the runs were made and what changed (default: the merged file's)")
    args = ap.parse_args()
    rows, env, old_doc = {}, {}, None
    if args.merge_into:
        args.out = args.merge_into
        old = Path(args.merge_into).with_suffix(".json")
        old_doc = json.loads(old.read_text()) if old.exists() else None
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for d in args.out_dirs:
            for path in tune_reports(d, scratch):
                report = json.loads(path.read_text())
                problem = path.stem[len("tune-"):].rsplit("-", 1)[0]
                # A later run of the same problem, numerics and anchor replaces an earlier one.
                for r in report["rows"]:
                    rows[(problem, report["numerics"], r.get("anchor"))] = row_of(problem, report, r)
            env = env or environment(d, scratch)
    print(results_table.write(Path(args.out), results_table.merge(old_doc, list(rows.values()), env, args.note)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
