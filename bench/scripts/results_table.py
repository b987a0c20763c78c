"""One results file of per-kernel rows (bench/results/gemm_h100.json, fused_h100.json): merging a run's rows
into it and writing its Markdown table. Shared by gemm_report.py and fused_ops_report.py.

Every row says when it was measured ("<date> commit <sha>"), because a merged file holds rows of several
runs; the file's header names the latest run that touched it.
"""
from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path

WIN_MARGIN = 0.03  # the tuner's gate (src/realize/candidate_tuner.cpp): a FACT kernel must beat PyTorch by 3%
FUSED_TITLE = "Fused kernels (GEMM epilogues, normalization incl. residual add + norm, attention, rope)"
TITLES = {"gemm_h100": "GEMM benchmark", "gemm_h200": "GEMM benchmark", "fused_h100": FUSED_TITLE,
          "fused_h200": FUSED_TITLE}


def this_run() -> str:
    """The measured stamp of rows made now: today's date and the checkout's commit (the device copy has none)."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return f"{dt.date.today().isoformat()} commit {commit}"


def row_key(r: dict) -> tuple:
    # A run that measured a problem's pattern in a numerics mode replaces all its earlier rows (every anchor).
    return r.get("problem"), r.get("pattern"), r.get("numerics")


def merge(old_doc: dict | None, rows: list[dict], env: dict, note: str | None = None) -> dict:
    """old_doc's rows, less those this run measured again (same problem, pattern and numerics), plus rows.
    Old rows keep the stamp of the header they came under; new ones get this run's. The note (how the runs were
    made, what changed) is the given one, else old_doc's."""
    stamp = this_run()
    for r in rows:
        r.setdefault("measured", stamp)
    kept = []
    if old_doc:
        fresh = {row_key(r) for r in rows}
        for r in old_doc.get("rows", []):
            r.setdefault("measured", f"{old_doc.get('date')} commit {old_doc.get('commit')}")
            if row_key(r) not in fresh:
                kept.append(r)
    order = {n: i for i, n in enumerate(["fp32", "3xtf32", "tf32", "bf16", "fp16"])}
    merged = sorted(kept + rows, key=lambda r: (r["problem"], order.get(r["numerics"], 9)))
    date, commit = stamp.split(" commit ")
    doc = {"device": env.get("device") or (old_doc or {}).get("device"), "date": date, "commit": commit,
           "torch": env.get("torch") or (old_doc or {}).get("torch"),
           "cuda": env.get("cuda") or (old_doc or {}).get("cuda"), "cutlass": "4.2.0", "rows": merged}
    note = note or (old_doc or {}).get("note")
    if note:
        doc["note"] = note
    return doc


def markdown(doc: dict, title: str) -> str:
    f = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    lines = [f"# {title}: {doc.get('device')}, torch {doc.get('torch')}, CUTLASS {doc.get('cutlass')}", ""]
    if doc.get("note"):
        lines += [doc["note"], ""]
    lines += [f"Latest run merged: {doc.get('date')}, commit {doc.get('commit')}; each row's own run is in column "
             "`measured`. Times are medians (CUDA events, rotating inputs); rel_err is the relative Frobenius error "
             "vs float64.",
             f"`kept` says what the composed module uses: a FACT kernel only when it verified and beat the baseline by > "
             f"{WIN_MARGIN:.0%}. 3xtf32 rows are fp32-accurate only if rel_err <= 2x cuBLAS fp32's (column `fp32-accurate`).",
             "Normalization rows: `checked` names the outputs verified (an add-norm whose sum the graph reads again "
             "writes it too) and the row counts.", "",
             "| problem | pattern | numerics | baseline | baseline ms | best FACT ms | FACT / baseline | kept | rel_err "
             "| baseline rel_err | fp32-accurate | checked | measured |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        accurate = {True: "yes", False: "NO", None: "-"}[r.get("fp32_accuracy_target_met")]
        if r.get("baseline_ms") is None and r.get("fact_ms") is None:
            lines.append(f"| {r['problem']} | {r['pattern']} | {r['numerics']} | - | - | - | - | "
                         f"pytorch ({r.get('status')}) | - | - | - | - | {r.get('measured', '-')} |")
            continue
        lines.append(f"| {r['problem']} | {r['pattern']} | {r['numerics']} | {r.get('baseline') or '-'} | "
                     f"{f(r.get('baseline_ms'), '.4f')} | {f(r.get('fact_ms'), '.4f')} | "
                     f"{f(r.get('cutlass_vs_baseline'), '.2f')}x | {r.get('kept')} | {f(r.get('rel_err'), '.2e')} | "
                     f"{f(r.get('baseline_rel_err'), '.2e')} | {accurate} | {r.get('checked') or '-'} | "
                     f"{r.get('measured', '-')} |")
    return "\n".join(lines) + "\n"


def write(out: Path, doc: dict) -> str:
    """RESULTS.json and RESULTS.md for out (a path without suffix); returns the Markdown."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    text = markdown(doc, TITLES.get(out.name, "Benchmark"))
    out.with_suffix(".md").write_text(text)
    return text
