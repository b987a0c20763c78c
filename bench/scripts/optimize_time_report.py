"""Turns the archive of bench/scripts/optimize_time_h100.sh (cold, warm and warm-without-torch.compile runs of
`fact optimize` on one machine) into bench/results/optimize_time_h100.json and a Markdown table beside it: wall
time per run, what report.json counts (Python starts, compiles per kernel, seconds per step), the composed
module's time and check, with device, date and commit.

Usage: python bench/scripts/optimize_time_report.py OUT_DIR... [--out bench/results/optimize_time_h100]
Several OUT_DIRs (device calls, each on its own machine) give one table, rows numbered by call; an archive with
several problems (work/<problem>/<run>/) gives their rows in turn.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import tarfile
import tempfile
from pathlib import Path

RUNS = ("cold", "warm", "warm-fact")  # the script's order
WHAT = {"cold": "tuning DB, kernel and trace caches empty (tunes)",
        "warm": "tuning DB, kernel and trace caches warm",
        "warm-fact": "warm, torch.compile baselines not timed (--no-compile-baselines)"}


def wall_less_e2e(wall_s: float, steps: dict) -> float | None:
    """The wall time less the end-to-end check and timing step (the issue's warm target leaves it out)."""
    return round(wall_s - steps["e2e check"], 1) if "e2e check" in steps else None


def row_of(folder: Path) -> dict:
    run = json.loads((folder / "run.json").read_text())
    report_path = folder / "report.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    e = report.get("e2e") or {}
    process = report.get("process") or {}
    compiles = process.get("compiles") or {}
    what = WHAT.get(run["run"], "")
    if run["run"] == "cold" and run.get("tuning_db_carried"):
        what = "tuning DB carried from an earlier call (.devcache), kernel cache empty"
    return {"run": run["run"], "what": what, "wall_s": round(run["wall_s"], 1),
            "wall_s_less_e2e": wall_less_e2e(run["wall_s"], process.get("step_seconds") or {}), "top": run.get("top", 4),
            "exit": run["exit"], "python_starts": process.get("python_starts"),
            "python_starts_by_use": process.get("python_starts_by_use"),
            "fact_starts": process.get("fact_starts"), "compiles": compiles,
            "max_compiles_per_kernel": max(compiles.values()) if compiles else None,
            "step_seconds": process.get("step_seconds"),
            "fact_ms": e.get("composed_ms"), "eager_ms": e.get("eager_ms"), "correct": e.get("correct"),
            "fact_ops": [f"{p['rule']}@{p['anchor']}" for p in report.get("patterns", []) if p.get("accepted")],
            "device": e.get("device"), "torch": e.get("torch"), "numerics": report.get("numerics"),
            "model": report.get("model")}


def fmt(v, spec="{}"):
    return "-" if v is None else spec.format(v)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dirs", nargs="+",
                    help="each call's $OUT, in call order; OUT@COMMIT names the commit its binary was built from "
                         "(default: HEAD)")
    ap.add_argument("--out", default="bench/results/optimize_time_h100")
    ap.add_argument("--previous", type=Path,
                    help="an earlier report (JSON) whose rows are kept, with their commit, except a problem's run again "
                         "here at the same commit and runs without a report")
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    rows = []
    for call, arg in enumerate(args.out_dirs, 1):
        out_dir, _, call_commit = arg.partition("@")
        out_dir = Path(out_dir)
        archive = out_dir / "optimize_time.tgz"
        if not archive.is_file():
            raise SystemExit(f"{archive}: no such file (the $OUT of bench/scripts/optimize_time_h100.sh)")
        with tempfile.TemporaryDirectory() as tmp:
            with tarfile.open(archive) as t:
                t.extractall(tmp, filter="data")
            work = Path(tmp) / "work"
            # One problem per archive (work/<run>/), or several (work/<problem>/<run>/).
            folders = [work] + sorted(d for d in work.iterdir() if d.is_dir() and d.name not in RUNS)
            rows += [dict(row_of(f / r), call=call, commit=call_commit or commit, date=dt.date.today().isoformat())
                     for f in folders for r in RUNS if (f / r / "run.json").is_file()]
    # A run that wrote no report never started FACT (the problem file was not there): named below the table.
    unstarted = [r for r in rows if r["model"] is None]
    rows = [r for r in rows if r["model"] is not None]
    if not rows:
        raise SystemExit(f"no run in the optimize_time.tgz of {', '.join(map(str, args.out_dirs))}")
    if args.previous:
        earlier = json.loads(args.previous.read_text())
        again = {(r["model"], r["commit"]) for r in rows}
        kept = [dict(r, commit=r.get("commit", earlier["commit"]), date=r.get("date", earlier["date"]), call="earlier",
                     wall_s_less_e2e=r.get("wall_s_less_e2e", wall_less_e2e(r["wall_s"], r.get("step_seconds") or {})))
                for r in earlier["rows"]
                if r["model"] is not None and (r["model"], r.get("commit", earlier["commit"])) not in again]
        rows = kept + rows
    known = next((r for r in rows if r["device"]), rows[0])
    models = sorted({r["model"] for r in rows if r["model"]})
    tops = sorted({r["top"] for r in rows})
    doc = {"device": known["device"], "torch": known["torch"], "date": dt.date.today().isoformat(), "commit": commit,
           "model": models[0] if len(models) == 1 else models, "numerics": known["numerics"],
           "source": "bench/scripts/optimize_time_h100.sh (three `fact optimize` runs per problem on one machine)",
           "rows": rows}
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = [f"# `fact optimize` wall time: {doc['device']}, torch {doc['torch']} ({doc['date']}, commit {commit})", "",
             f"Numerics {doc['numerics']}, `--top {'/'.join(map(str, tops))} --no-max-autotune` (--top counts kernels "
             "built); three runs per problem on one machine, in this order (a new call is a fresh machine; each "
             "problem's cold run has an empty tuning database and kernel cache of its own). Wall time of the whole command "
             "(trace to report). Python starts and compiles per kernel as report.json counts them. FACT ms: the "
             "composed module (CUDA-event median).", "",
             "`wall s less e2e`: the wall time less the end-to-end check and timing step (the issue's warm target "
             "leaves it out). Rows of call `earlier` come from an earlier report (`--previous`), at the commit they name.", "",
             "| call | commit | problem | run | state | wall s | wall s less e2e | exit | Python starts | max compiles of one kernel | FACT ms | eager ms | correct | FACT ops |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['call']} | {r['commit']} | {r['model']} | {r['run']} | {r['what']} | {r['wall_s']} | "
                     f"{fmt(r.get('wall_s_less_e2e'))} | {r['exit']} | "
                     f"{fmt(r['python_starts'])} | {fmt(r['max_compiles_per_kernel'])} | {fmt(r['fact_ms'], '{:.2f}')} | "
                     f"{fmt(r['eager_ms'], '{:.2f}')} | {r['correct']} | {', '.join(r['fact_ops']) or 'none'} |")
    if unstarted:
        lines += ["", "Runs without a report (FACT did not start, e.g. the problem file was not carried): "
                  + ", ".join(f"call {r['call']} {r['run']} (exit {r['exit']})" for r in unstarted) + "."]
    lines += ["", "Seconds per step, and what each Python start was for:"]
    for r in rows:
        steps = r["step_seconds"] or {}
        uses = r["python_starts_by_use"] or {}
        lines.append(f"- call {r['call']} {r['model']} {r['run']}: "
                     + (", ".join(f"{k} {v:.1f}" for k, v in steps.items()) or "not in report.json")
                     + "; Python: " + (", ".join(f"{k} x{v}" for k, v in uses.items()) or "-"))
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
