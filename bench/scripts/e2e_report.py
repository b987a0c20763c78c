"""Merges the archives of bench/scripts/e2e_h100.sh runs into bench/results/e2e_h100.json and a Markdown table
beside it (device, date, commit, torch, CUTLASS, numerics per row), and copies each run's chart to
bench/results/e2e_h100/<problem>-<numerics>.png. Rows come from the report.json of `fact optimize`.

Usage: python bench/scripts/e2e_report.py OUT_DIR... [--out bench/results/e2e_h100] [--merge]
Each OUT_DIR holds e2e_<numerics>.tgz; for a problem and numerics measured in several runs, the last OUT_DIR wins.
--merge keeps the rows of the existing OUT.json that these runs did not measure; every row names its run.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

ORDER = {n: i for i, n in enumerate(["fp32", "3xtf32", "tf32", "bf16", "fp16"])}


def runs(out_dir: Path, scratch: Path):
    """(problem-numerics folder, report) for every report.json in the directory's archives."""
    for i, tgz in enumerate(sorted(out_dir.glob("e2e_*.tgz"))):
        dest = scratch / out_dir.name / str(i)
        with tarfile.open(tgz) as t:
            t.extractall(dest, filter="data")
        for report in sorted(dest.glob("work/*/report.json")):
            yield report.parent, json.loads(report.read_text())


def row_of(folder: Path, report: dict) -> dict:
    e = report.get("e2e") or {}
    variants = e.get("variants") or {}
    return {
        "problem": Path(report["model"]).stem,
        "numerics": e.get("numerics") or report.get("numerics"),
        "float32_matmul_precision": e.get("float32_matmul_precision"),
        "dtype": e.get("dtype"),
        "eager_ms": e.get("eager_ms"),
        "compile_default_ms": e.get("compile_default_ms"),
        "compile_reduce_overhead_ms": e.get("compile_reduce_overhead_ms"),
        "compile_max_autotune_ms": e.get("compile_max_autotune_ms"),
        "fact_ms": e.get("composed_ms"),
        "speedups": e.get("speedups"),
        "correct_kernelbench_1e-2": e.get("correct"),
        "rel_err": e.get("rel_err_composed"),
        "baseline_rel_err": e.get("rel_err_original"),
        "compile_seconds": e.get("compile_seconds"),
        # A baseline that failed or was not run is kept with its reason, never dropped.
        "baseline_status": {k: {"status": v.get("status"), "error": v.get("error")} for k, v in variants.items()
                            if k.startswith("compile")},
        "fallback": e.get("fallback"),
        "replay": e.get("replay"),  # op by op or one CUDA graph a call (the end-to-end check's choice)
        "accepted": [p for p in report.get("patterns", []) if p.get("accepted")],
        "kept_in_pytorch": [{"rule": p["rule"], "anchor": p["anchor"], "why": p.get("why")}
                            for p in report.get("patterns", []) if not p.get("accepted")],
        "chart": (folder / "chart.png") if (folder / "chart.png").is_file() else None,
        "device": e.get("device"), "torch": e.get("torch"),
    }


def fmt(v, spec="{:.2f}"):
    return "-" if v is None else spec.format(v)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dirs", nargs="+", type=Path)
    ap.add_argument("--out", default="bench/results/e2e_h100")
    ap.add_argument("--merge", action="store_true", help="keep the rows of OUT.json that this run did not measure")
    args = ap.parse_args()
    out = Path(args.out)
    charts = out.parent / out.name
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for d in args.out_dirs:
            for folder, report in runs(d, Path(tmp)):
                r = row_of(folder, report)
                if r["chart"]:
                    charts.mkdir(parents=True, exist_ok=True)
                    dest = charts / f"{r['problem']}-{r['numerics']}.png"
                    shutil.copyfile(r["chart"], dest)
                    r["chart"] = str(dest)
                rows[(r["problem"], r["numerics"])] = r
    if not rows:
        raise SystemExit(f"no report.json in the e2e_*.tgz of {', '.join(map(str, args.out_dirs))}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    first = next(iter(rows.values()))
    device, torch_version = first["device"], first["torch"]
    for r in rows.values():
        r["measured"] = f"{dt.date.today().isoformat()} commit {commit}"
    # Rows of earlier runs stay, with the run they were measured in, unless this run measured them again.
    old_path = out.with_suffix(".json")
    if args.merge and old_path.exists():
        old = json.loads(old_path.read_text())
        for r in old["rows"]:
            r.setdefault("measured", f"{old.get('date')} commit {old.get('commit')}")
            rows.setdefault((r["problem"], r["numerics"]), r)
    rows = sorted(rows.values(), key=lambda r: (r["problem"], ORDER.get(r["numerics"], 9)))
    doc = {"device": device, "date": dt.date.today().isoformat(), "commit": commit, "torch": torch_version,
           "cutlass": "4.2.0", "source": "bench/scripts/e2e_h100.sh (fact optimize per problem and numerics)",
           "rows": [{k: v for k, v in r.items() if k not in ("device", "torch")} for r in rows]}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = [f"# End-to-end: {doc['device']}, torch {doc['torch']}, CUTLASS 4.2.0 (latest run merged: {doc['date']}, "
             f"commit {commit}; each row's run in column `measured`)", "",
             "`fact optimize` per problem and numerics: the composed module (FACT) against the original in eager mode,",
             "torch.compile (default, reduce-overhead: its CUDA graphs, and max-autotune), all timed in one process under the same numerics",
             "(fp32/3xtf32: float32 matmul precision \"highest\"; tf32: \"high\"; bf16/fp16: model and inputs cast).",
             "Times: CUDA-event medians after warm-up (compile time excluded, in compile s). Correct: KernelBench's rule",
             "(5 trials, atol = rtol = 1e-2); rel err vs a float64 run of the original.", "",
             "| problem | numerics | eager ms | compile ms | reduce-overhead ms | max-autotune ms | FACT ms | vs eager | vs best compile | correct | rel err FACT / original | FACT ops | measured | note |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sp = r["speedups"] or {}
        notes = []
        if (r["fallback"] or {}).get("applied"):
            notes.append("fell back: " + r["fallback"]["reason"])
        if (r.get("replay") or {}).get("chosen") == "cuda_graph":
            notes.append("replay: " + r["replay"]["why"])
        for k, v in r["baseline_status"].items():
            if v["status"] != "ok":
                notes.append(f"{k} {v['status']}: {(v['error'] or '')[:80]}")
        ops = ", ".join(f"{p['rule']}@{p['anchor']}" for p in r["accepted"]) or "none"
        lines.append(f"| {r['problem']} | {r['numerics']} | {fmt(r['eager_ms'])} | {fmt(r['compile_default_ms'])} | "
                     f"{fmt(r.get('compile_reduce_overhead_ms'))} | {fmt(r['compile_max_autotune_ms'])} | {fmt(r['fact_ms'])} | {fmt(sp.get('vs_eager'), '{:.2f}x')} | "
                     f"{fmt(sp.get('vs_best_compile'), '{:.2f}x')} | {r['correct_kernelbench_1e-2']} | "
                     f"{fmt(r['rel_err'], '{:.2e}')} / {fmt(r['baseline_rel_err'], '{:.2e}')} | {ops} | {r.get('measured', '-')} | "
                     f"{'; '.join(notes)} |")
    lines += ["", "Kept in PyTorch, per row:"]
    for r in rows:
        kept = "; ".join(f"{k['rule']}@{k['anchor']}: {k['why']}" for k in r["kept_in_pytorch"]) or "nothing"
        lines.append(f"- {r['problem']} {r['numerics']}: {kept}")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
