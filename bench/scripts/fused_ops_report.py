"""Rows for bench/results/fused_h100.json (the schema of gemm_h100.json, see gemm_report.py) from the
`fact tune --report` files of bench/scripts/fused_ops_h100.sh: one row per normalization / attention / rope
pattern and numerics, FACT's best kernel vs the fastest PyTorch way in the same numerics, with the error
of both against float64. With --merge, the rows replace same-keyed rows of an existing results file
(problem, pattern, numerics, anchor) and every other row (e.g. the GEMM epilogue rows) is kept.

With --merge the Markdown table beside the results file (fused_h100.md) is rewritten from the merged rows.
A normalization row says what was checked against float64: the outputs (y, and the sum x + residual of an
add-norm whose graph reads it again) and the row counts (the problem's and norm_case.ODD_ROWS).

Usage: python3 bench/scripts/fused_ops_report.py WORK_DIR [--out rows.json] [--merge bench/results/fused_h100.json] [--note TEXT]
WORK_DIR holds tune-<problem>-<numerics>.json and measure-*-result.json (or is an unpacked fused_ops_work.tgz).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import results_table

WIN_MARGIN = results_table.WIN_MARGIN
ODD_ROWS = 37      # python/fact/realize/norm_case.py: the verify variant's row count


def checked(problem_json: dict) -> str | None:
    """What a normalization candidate was verified on (norm_case.NormCase: every output, also at ODD_ROWS)."""
    if "cols" not in problem_json or "rows" not in problem_json:
        return None
    outputs = "y and sum" if problem_json.get("store_sum") else "y"
    rows = sorted({problem_json["rows"], ODD_ROWS})
    return f"{outputs} vs float64 at {' and '.join(map(str, rows))} rows of {problem_json['cols']}"


def row_of(problem: str, report: dict, r: dict) -> dict:
    fact_ms, base_ms, cfg = r.get("fact_ms"), r.get("baseline_ms"), r.get("config")
    used = bool(cfg) and fact_ms is not None and base_ms is not None and fact_ms < base_ms * (1 - WIN_MARGIN)
    problem_json = r.get("problem") or {}
    return {
        "problem": problem,
        "pattern": r.get("pattern"),
        "anchor": r.get("anchor"),
        "family": r.get("family"),
        "numerics": report["numerics"],
        # The kernel's own numerics: a norm in a tf32 plan accumulates and stores fp32.
        "kernel_numerics": problem_json.get("numerics"),
        "shape": problem_json,
        "checked": checked(problem_json) if r.get("family") == "normalization" else None,
        "baseline": r.get("baseline") or None,
        "baseline_ms": base_ms,
        "fact_ms": fact_ms,
        "speedup": (base_ms / fact_ms) if used else 1.0,
        "cutlass_vs_baseline": (base_ms / fact_ms) if base_ms and fact_ms else None,
        "kept": "fact" if used else "pytorch",
        "fp32_accuracy_target_met": None,
        "status": r.get("status"),
        "rel_err": r.get("rel_err"),
        "baseline_rel_err": r.get("baseline_rel_err"),
        "fp32_reference_err": None,
        "config": cfg if cfg else (r.get("winner") or None),
        "candidates": r.get("candidates"),
        "verified": r.get("verified"),
        "tune_seconds": r.get("seconds"),
        "message": r.get("message"),
    }


def environment(work: Path) -> dict:
    for res in sorted(work.glob("**/measure-*-result.json")):
        d = json.loads(res.read_text())
        if d.get("device"):
            return {"device": d.get("device"), "torch": d.get("torch"), "cuda": d.get("cuda")}
    return {}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("work", type=Path)
    ap.add_argument("--out", type=Path, default=Path("fused_ops_rows.json"))
    ap.add_argument("--merge", type=Path, help="an existing results file to merge the rows into (written in place)")
    ap.add_argument("--note", default=None, help="how the runs were made and what changed (default: the merged file's)")
    args = ap.parse_args()
    rows = []
    for path in sorted(args.work.glob("**/tune-*.json")):
        report = json.loads(path.read_text())
        problem = path.stem[len("tune-"):].rsplit("-", 1)[0]
        rows += [row_of(problem, report, r) for r in report["rows"]]
    env = environment(args.work)
    args.out.write_text(json.dumps(results_table.merge(None, rows, env), indent=1) + "\n")
    if args.merge:
        old_doc = json.loads(args.merge.read_text()) if args.merge.exists() else None
        results_table.write(args.merge.with_suffix(""), results_table.merge(old_doc, rows, env, args.note))
    print(f"{'problem':<24} {'pattern':<22} {'anchor':<12} {'num':<5} {'status':<14} {'fact ms':>9} {'torch ms':>9} "
          f"{'x':>6} {'rel err':>9}  baseline")
    for r in rows:
        f = lambda v, s: "-" if v is None else format(v, s)  # noqa: E731
        print(f"{r['problem']:<24} {r['pattern']:<22} {str(r['anchor']):<12} {r['numerics']:<5} {r['status']:<14} "
              f"{f(r['fact_ms'], '.4f'):>9} {f(r['baseline_ms'], '.4f'):>9} {f(r['cutlass_vs_baseline'], '.2f'):>6} "
              f"{f(r['rel_err'], '.2e'):>9}  {r['baseline']}")
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
