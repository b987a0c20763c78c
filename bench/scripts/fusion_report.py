"""bench/results/fusion_h100.{json,md}: the generic-fusion benchmark (issue 16) from `fact bench` suites that
bench/scripts/fusion_h100.sh ran on the H100, one per numerics mode.

    python bench/scripts/fusion_report.py [--previous bench/results/fusion_h100.json] --default SUITE.json [...] \
        [--tf32 SUITE.json ...] --device "H100 ..." [--commit SHA] -o bench/results/fusion_h100

Several suites per mode (one per level, or a later re-run of some problems): a problem measured in a later file
replaces its row from an earlier one; a problem a later file did not run keeps its earlier row. --previous starts
from an earlier report's rows (its suites are not kept), so one level can be re-measured without the others.

Per problem and mode: FACT ms, eager ms, torch.compile ms (both baselines in the same numerics as FACT), rel err
against float64 (FACT's and eager's), status, and the fused region: graph ops inside FACT kernels / graph ops.
The summary gives the issue's targets: geomean over the level-2 GEMM chains vs eager in default numerics and vs
torch.compile in tf32, and per level-1 problem vs torch.compile. A failed or incorrect problem counts as measured
and incorrect, and its speedup counts as 0 toward no geomean (geomeans are over correct problems, with the count).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import subprocess
from pathlib import Path

MODES = ("default", "tf32")
FIELDS = ("status", "numerics", "composed_ms", "eager_ms", "compile_default_ms", "speedup_eager", "speedup_compile",
          "rel_err_composed", "rel_err_original", "fact_patterns", "fact_ops", "graph_ops", "reason")


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(problems: list[dict], level: str, mode: str, key: str) -> dict:
    rows = [p[mode] for p in problems if p["level"] == level and p.get(mode)]
    measured = [r for r in rows if r["status"] in ("correct", "incorrect", "failed")]
    speed = [r[key] for r in measured if r["status"] == "correct" and r.get(key)]
    return {"measured": len(measured), "correct": sum(r["status"] == "correct" for r in measured),
            "geomean": geomean(speed), "count": len(speed),
            "at_least_1x": sum(s >= 1.0 for s in speed)}


MEASURED = ("correct", "incorrect", "failed")


def suites_of_report(report: dict) -> dict:
    """An earlier report's rows as one suite per mode, to be overridden by the suites measured since."""
    return {mode: [{"problems": [{"id": p["id"], "level": p["level"], **p[mode]} for p in report["problems"]
                                 if p.get(mode)]}] for mode in MODES}


def build(suites: dict, device: str, commit: str) -> dict:
    by_id: dict[str, dict] = {}
    for mode, files in suites.items():
        for suite in files:
            for p in suite["problems"]:
                row = by_id.setdefault(p["id"], {"id": p["id"], "level": p["level"]})
                if mode not in row or p.get("status") in MEASURED:
                    row[mode] = {k: p.get(k) for k in FIELDS}
    problems = sorted(by_id.values(), key=lambda r: (r["level"], int(r["id"].split("/")[1].split("_")[0])))
    return {"format": "fact-fusion-bench", "version": 1, "device": device, "date": dt.date.today().isoformat(),
            "commit": commit, "selection": "bench/fusion_problems.json (bench/scripts/fusion_problems.py)",
            "numerics": {"default": "each problem's own: 3xtf32 (fp32-accurate) for fp32 models; eager and "
                                    "torch.compile in PyTorch's default fp32 (matmuls full fp32)",
                         "tf32": "tf32 for FACT; eager and torch.compile with float32 matmul precision 'high'"},
            "summary": {"level2_vs_eager_default": summary(problems, "level2", "default", "speedup_eager"),
                        "level2_vs_compile_tf32": summary(problems, "level2", "tf32", "speedup_compile"),
                        "level2_vs_compile_default": summary(problems, "level2", "default", "speedup_compile"),
                        "level1_vs_compile_default": summary(problems, "level1", "default", "speedup_compile"),
                        "level1_vs_eager_default": summary(problems, "level1", "default", "speedup_eager")},
            "problems": problems}


def cell(v, fmt="{:.3g}"):
    return "—" if v is None else fmt.format(v)


def markdown(doc: dict) -> str:
    md = [f"# Generic fusion benchmark ({doc['device']}, {doc['date']}, commit {doc['commit']})", "",
          f"Problems: {doc['selection']}. Numerics: default = {doc['numerics']['default']}; tf32 = "
          f"{doc['numerics']['tf32']}.", *(["", doc["note"], ""] if doc.get("note") else [""]), "## Summary", "", "| target | measured | correct | geomean | n | >= 1.0x |",
          "|---|---|---|---|---|---|"]
    for k, s in doc["summary"].items():
        md.append(f"| {k} | {s['measured']} | {s['correct']} | {cell(s['geomean'], '{:.2f}x')} | {s['count']} | "
                  f"{s['at_least_1x']} |")
    md += ["", "## Per problem", "", "`ops`: graph ops inside FACT kernels / graph ops (views left out).", "",
           "| problem | mode | status | ops | FACT ms | eager ms | compile ms | vs eager | vs compile | rel err FACT / eager "
           "| why |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in doc["problems"]:
        for mode in MODES:
            r = p.get(mode)
            if not r:
                continue
            ops = f"{r['fact_ops']}/{r['graph_ops']}" if r.get("graph_ops") is not None else "—"
            rel = f"{cell(r['rel_err_composed'])} / {cell(r['rel_err_original'])}"
            why = (r.get("reason") or "").replace("|", "/").replace("\n", " ")[:160]
            md.append(f"| {p['id']} | {mode} | {r['status']} | {ops} | {cell(r['composed_ms'], '{:.4g}')} | "
                      f"{cell(r['eager_ms'], '{:.4g}')} | {cell(r['compile_default_ms'], '{:.4g}')} | "
                      f"{cell(r['speedup_eager'], '{:.2f}x')} | {cell(r['speedup_compile'], '{:.2f}x')} | {rel} | {why} |")
    return "\n".join(md) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--previous", help="an earlier fusion report whose rows the suites below replace where measured")
    ap.add_argument("--default", nargs="+", default=[], help="suite.json files of runs in each problem's own numerics")
    ap.add_argument("--tf32", nargs="+", help="suite.json files of tf32 runs")
    ap.add_argument("--device", required=True)
    ap.add_argument("--commit", default=None, help="the binary's commit (default: this checkout's)")
    ap.add_argument("--note", default="", help="how the suites were run (calls, settings, what is missing)")
    ap.add_argument("-o", "--output", required=True, help="path without extension")
    a = ap.parse_args()
    if not a.default and not a.tf32:
        ap.error("name at least one suite.json (--default or --tf32)")
    suites = suites_of_report(json.loads(Path(a.previous).read_text())) if a.previous else {m: [] for m in MODES}
    suites["default"] += [json.loads(Path(f).read_text()) for f in a.default]
    suites["tf32"] += [json.loads(Path(f).read_text()) for f in a.tf32 or []]
    commit = a.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True).stdout.strip()
    doc = build(suites, a.device, commit)
    doc["note"] = a.note
    Path(a.output + ".json").write_text(json.dumps(doc, indent=1) + "\n")
    Path(a.output + ".md").write_text(markdown(doc))
    print(markdown(doc).split("## Per problem")[0])


if __name__ == "__main__":
    main()
