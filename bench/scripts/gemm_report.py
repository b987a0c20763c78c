"""Merges the per-problem `fact tune --report` files of a device run into bench/results/gemm_h100.json
and a Markdown table beside it (device, date, commit, torch, CUTLASS, numerics per row).

Usage: python bench/scripts/gemm_report.py OUT_DIR... [--out bench/results/gemm_h100] [--merge-into RESULTS]
Each OUT_DIR holds gemm_work*.tgz (or an unpacked work/ folder) from bench/scripts/gemm_h100.sh (or
fused_h100.sh); for a problem and numerics measured in several runs, the last OUT_DIR given wins.
--merge-into bench/results/fused_h100 keeps that file's rows of other (problem, numerics, pattern) keys
and writes the merged table there (RESULTS.json and RESULTS.md) instead of --out.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import tarfile
import tempfile
from pathlib import Path

# The tuner's gate (src/realize/gemm_tuner.cpp): a FACT kernel is used only when it beats the baseline
# by more than this fraction; reapplied here so rows measured by older binaries follow today's rule.
WIN_MARGIN = 0.03
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
    args = ap.parse_args()
    rows, env = {}, {}
    if args.merge_into:
        args.out = args.merge_into
        old = Path(args.merge_into).with_suffix(".json")
        # Rows of an earlier run are kept unless this run measured the same problem, numerics and pattern.
        old_doc = json.loads(old.read_text()) if old.exists() else {"rows": []}
        kept = old_doc["rows"]
        for i, r in enumerate(kept):
            r.setdefault("measured", f"{old_doc.get('date')} commit {old_doc.get('commit')}")
            rows[("kept", i, r["problem"], r["numerics"], r.get("pattern"))] = r
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for d in args.out_dirs:
            for path in tune_reports(d, scratch):
                report = json.loads(path.read_text())
                problem = path.stem[len("tune-"):].rsplit("-", 1)[0]
                # A later run of the same problem and numerics replaces an earlier one.
                for r in report["rows"]:
                    new = row_of(problem, report, r)
                    for key in [k for k, v in rows.items() if k[0] == "kept" and
                                (v["problem"], v["numerics"], v.get("pattern")) == (problem, new["numerics"], new["pattern"])]:
                        del rows[key]
                    rows[(problem, report["numerics"], r.get("anchor"))] = new
            env = env or environment(d, scratch)
    order = {n: i for i, n in enumerate(["fp32", "3xtf32", "tf32", "bf16", "fp16"])}
    rows = sorted(rows.values(), key=lambda r: (r["problem"], order.get(r["numerics"], 9)))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    for r in rows:  # rows merged from an earlier file say when they were measured; this run's rows likewise
        r.setdefault("measured", f"{dt.date.today().isoformat()} commit {commit}")
    doc = {"device": env.get("device"), "date": dt.date.today().isoformat(), "commit": commit,
           "torch": env.get("torch"), "cuda": env.get("cuda"), "cutlass": "4.2.0", "rows": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = [f"# GEMM benchmark: {doc['device']}, {doc['date']}, commit {commit}, torch {doc['torch']}, CUTLASS 4.2.0", "",
             "Times are medians (CUDA events, rotating inputs); rel_err is the relative Frobenius error vs float64.",
             f"`kept` says what the composed module uses: a FACT kernel only when it verified and beat the baseline by > {WIN_MARGIN:.0%}.",
             "3xtf32 rows are fp32-accurate only if rel_err <= 2x cuBLAS fp32's (column `fp32-accurate`).", "",
             "| problem | pattern | numerics | baseline | baseline ms | best CUTLASS ms | CUTLASS / baseline | kept | rel_err | baseline rel_err | fp32-accurate |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["baseline_ms"] is None and r["fact_ms"] is None:
            lines.append(f"| {r['problem']} | {r['pattern']} | {r['numerics']} | - | - | - | - | pytorch ({r['status']}) | - | - | - |")
            continue
        lines.append(f"| {r['problem']} | {r['pattern']} | {r['numerics']} | {r['baseline']} | {fmt(r['baseline_ms'], '.4f')} | "
                     f"{fmt(r['fact_ms'], '.4f')} | {fmt(r['cutlass_vs_baseline'], '.2f')}x | {r['kept']} | "
                     f"{fmt(r['rel_err'], '.2e')} | {fmt(r['baseline_rel_err'], '.2e')} | "
                     f"{ {True: 'yes', False: 'NO', None: '-'}[r['fp32_accuracy_target_met']]} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
