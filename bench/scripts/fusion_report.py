"""bench/results/fusion_h100.{json,md}: the generic-fusion benchmark (issue 16) from `fact bench` suites that
bench/scripts/fusion_h100.sh ran on the H100, one per numerics mode; with --benchmark conv, the convolution benchmark
(issue 17, bench/results/conv_h100), whose --suite-dirs add each pattern's kernel time against PyTorch's.

    python bench/scripts/fusion_report.py [--previous bench/results/fusion_h100.json] --default SUITE.json [...] \
        [--tf32 SUITE.json ...] [--fp32-accurate SUITE.json ...] --device "H100 ..." [--commit SHA] \
        -o bench/results/fusion_h100

With --models, whole models run by `fact optimize` (one unpacked output folder each, e.g. bench/models/tv_resnet50.py's)
add rows "models/<file>" in default numerics, from the folder's report.json (the end-to-end check, the fallback when
the composed module lost) and its patterns.

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

MODES = ("default", "tf32", "fp32_accurate")
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


# fp32_accurate (the conv benchmark): FACT's convolutions in 3xTF32, PyTorch's with cuDNN's TF32 off.
FP32_ACCURATE = ("FACT's convolutions in 3xTF32 (fp32-accurate; `--conv-numerics 3xtf32`), other ops as default; eager "
                 "and torch.compile with cuDNN's TF32 off (torch.backends.cudnn.allow_tf32 = False)")


def suites_of_report(report: dict) -> dict:
    """An earlier report's rows as one suite per mode, to be overridden by the suites measured since."""
    return {mode: [{"problems": [{"id": p["id"], "level": p["level"], **p[mode]} for p in report["problems"]
                                 if p.get(mode)]}] for mode in MODES}  # (a report before a mode existed: empty)


BENCHMARKS = {
    "fusion": {"title": "Generic fusion benchmark", "format": "fact-fusion-bench", "problems": "bench/fusion_problems.json",
               "selection": "bench/fusion_problems.json (bench/scripts/fusion_problems.py)",
               "default": "each problem's own: 3xtf32 (fp32-accurate) for fp32 models; eager and torch.compile in "
                          "PyTorch's default fp32 (matmuls full fp32)"},
    "conv": {"title": "Convolution benchmark", "format": "fact-conv-bench", "problems": "bench/conv_problems.json",
             "selection": "bench/conv_problems.json (bench/scripts/fusion_problems.py --set conv)",
             "default": "FACT's convolutions in TF32, as PyTorch's cuDNN convolutions by default (torch.backends.cudnn."
                        "allow_tf32); other ops in each problem's own mode (3xtf32 for fp32 models); eager and "
                        "torch.compile in PyTorch's defaults"},
}


def kernel_rows(suite_dirs: list[str]) -> dict:
    """Per problem id, its patterns as the per-problem report.json of an unpacked suite folder gives them: FACT's
    verified kernel ms against PyTorch's ms for the same subgraph, and whether the composed module kept it."""
    out = {}
    for d in suite_dirs:
        for report in sorted(Path(d).glob("level*/*/report.json")):
            pid = f"{report.parent.parent.name}/{report.parent.name}"
            rows = json.loads(report.read_text()).get("patterns", [])
            out[pid] = [{k: r.get(k) for k in ("rule", "family", "accepted", "fact_ms", "pytorch_ms", "numerics", "why")}
                        for r in rows]
    return out


def model_rows(folders: list[str]) -> tuple[dict, dict]:
    """(a suite of the `fact optimize` output folders' end-to-end results, their patterns by problem id)."""
    problems, kernels = [], {}
    for folder in folders:
        report = json.loads((Path(folder) / "report.json").read_text())
        e2e, pid = report.get("e2e") or {}, f"models/{Path(report['model']).stem}"
        fallback = e2e.get("fallback") or {}
        patterns = report.get("patterns", [])
        accepted = sum(1 for r in patterns if r.get("accepted"))
        speed = e2e.get("speedups") or {}
        reason = ""
        if fallback.get("applied"):
            reason = (f"PyTorch's ops kept: {fallback.get('reason')} (FACT's composed module: "
                      f"{sum(1 for r in patterns if r.get('fact_ms') is not None)} of {len(patterns)} patterns tuned)")
        problems.append({"id": pid, "level": "models", "status": "correct" if e2e.get("correct") else "incorrect",
                         "numerics": e2e.get("numerics"), "composed_ms": e2e.get("composed_ms"),
                         "eager_ms": e2e.get("eager_ms"), "compile_default_ms": e2e.get("compile_default_ms"),
                         "speedup_eager": speed.get("vs_eager"), "speedup_compile": speed.get("vs_compile_default"),
                         "rel_err_composed": e2e.get("rel_err_composed"), "rel_err_original": e2e.get("rel_err_original"),
                         "fact_patterns": accepted,
                         "fact_ops": 0 if fallback.get("applied") else sum(r.get("ops") or 0 for r in patterns
                                                                          if r.get("accepted")),
                         "graph_ops": report.get("graph_ops"),
                         "reason": reason})
        kernels[pid] = [{k: r.get(k) for k in ("rule", "family", "accepted", "fact_ms", "pytorch_ms", "numerics", "why")}
                        for r in patterns]
    return {"problems": problems}, kernels


def problem_order(row: dict):
    """Level, then KernelBench's problem number (a model row has none)."""
    number = row["id"].split("/")[1].split("_")[0]
    return row["level"], int(number) if number.isdigit() else 0, row["id"]


def selected_ids(benchmark: str) -> set | None:
    """The benchmark's problem ids (a suite may also have run problems of the other benchmark); None: no list."""
    path = Path(__file__).resolve().parents[2] / BENCHMARKS[benchmark]["problems"]
    return {p["id"].removesuffix(".py") for p in json.loads(path.read_text())["problems"]} if path.is_file() else None


def build(suites: dict, device: str, commit: str, benchmark: str = "fusion", only_listed: bool = False) -> dict:
    by_id: dict[str, dict] = {}
    ids = selected_ids(benchmark) if only_listed else None
    for mode, files in suites.items():
        for suite in files:
            for p in suite["problems"]:
                if ids is not None and p["id"] not in ids and p["level"] != "models":
                    continue
                row = by_id.setdefault(p["id"], {"id": p["id"], "level": p["level"]})
                if mode not in row or p.get("status") in MEASURED:
                    row[mode] = {k: p.get(k) for k in FIELDS}
    problems = sorted(by_id.values(), key=problem_order)
    b = BENCHMARKS[benchmark]
    return {"format": b["format"], "version": 1, "title": b["title"], "device": device,
            "date": dt.date.today().isoformat(), "commit": commit, "selection": b["selection"],
            "numerics": {"default": b["default"],
                         "tf32": "tf32 for FACT; eager and torch.compile with float32 matmul precision 'high'",
                         "fp32_accurate": FP32_ACCURATE},
            "summary": {"level2_vs_eager_default": summary(problems, "level2", "default", "speedup_eager"),
                        "level2_vs_compile_tf32": summary(problems, "level2", "tf32", "speedup_compile"),
                        "level2_vs_compile_default": summary(problems, "level2", "default", "speedup_compile"),
                        "level1_vs_compile_default": summary(problems, "level1", "default", "speedup_compile"),
                        "level1_vs_eager_default": summary(problems, "level1", "default", "speedup_eager"),
                        "models_vs_compile_default": summary(problems, "models", "default", "speedup_compile"),
                        "level2_vs_compile_fp32_accurate": summary(problems, "level2", "fp32_accurate", "speedup_compile"),
                        "level1_vs_eager_fp32_accurate": summary(problems, "level1", "fp32_accurate", "speedup_eager")},
            "problems": problems}


def kernel_mode(k: dict) -> str:
    """The suite mode a per-pattern row was measured in: tf32 runs tune in tf32, default runs in each problem's own
    (a convolution's TF32), fp32-accurate runs a convolution in 3xtf32."""
    if str(k.get("rule", "")).startswith("conv") and k.get("numerics") == "3xtf32":
        return "fp32_accurate"
    return "tf32" if k.get("numerics") == "tf32" else "default"


def cell(v, fmt="{:.3g}"):
    return "—" if v is None else fmt.format(v)


def markdown(doc: dict) -> str:
    md = [f"# {doc.get('title', 'Generic fusion benchmark')} ({doc['device']}, {doc['date']}, commit {doc['commit']})", "",
          f"Problems: {doc['selection']}. Numerics: default = {doc['numerics']['default']}; tf32 = "
          f"{doc['numerics']['tf32']}" + (f"; fp32_accurate = {doc['numerics']['fp32_accurate']}"
                                          if 'fp32_accurate' in doc['numerics'] else "") + ".", *(["", doc["note"], ""] if doc.get("note") else [""]), "## Summary", "", "| target | measured | correct | geomean | n | >= 1.0x |",
          "|---|---|---|---|---|---|"]
    for k, s in doc["summary"].items():
        if not s["measured"] and k.startswith("models"):
            continue  # no model in this benchmark's runs
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
            ops = f"{r['fact_ops']}/{r['graph_ops']}" if None not in (r.get("fact_ops"), r.get("graph_ops")) else "—"
            rel = f"{cell(r['rel_err_composed'])} / {cell(r['rel_err_original'])}"
            why = (r.get("reason") or "").replace("|", "/").replace("\n", " ")[:160]
            md.append(f"| {p['id']} | {mode} | {r['status']} | {ops} | {cell(r['composed_ms'], '{:.4g}')} | "
                      f"{cell(r['eager_ms'], '{:.4g}')} | {cell(r['compile_default_ms'], '{:.4g}')} | "
                      f"{cell(r['speedup_eager'], '{:.2f}x')} | {cell(r['speedup_compile'], '{:.2f}x')} | {rel} | {why} |")
    kernels = [(p["id"], k) for p in doc["problems"] for k in p.get("kernels", []) if k.get("fact_ms") is not None]
    if kernels:
        md += ["", "## FACT's kernels against PyTorch's ops (tuning, per pattern)", "",
               "Each verified winner against what PyTorch runs for the same subgraph, from the problem's report; "
               "`kept` says whether the composed module uses it (the end-to-end gate can still fall back).", "",
               "| problem | pattern | numerics | FACT ms | PyTorch ms | ratio | kept | why |", "|---|---|---|---|---|---|---|---|"]
        for pid, k in kernels:
            ratio = k["pytorch_ms"] / k["fact_ms"] if k.get("pytorch_ms") else None
            why = (k.get("why") or "").replace("|", "/")[:140]
            md.append(f"| {pid} | {k['rule']} | {k.get('numerics') or '—'} | {cell(k['fact_ms'], '{:.4g}')} | "
                      f"{cell(k.get('pytorch_ms'), '{:.4g}')} | {cell(ratio, '{:.2f}x')} | "
                      f"{'yes' if k.get('accepted') else 'no'} | {why} |")
    return "\n".join(md) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--previous", help="an earlier fusion report whose rows the suites below replace where measured")
    ap.add_argument("--default", nargs="+", default=[], help="suite.json files of runs in each problem's own numerics")
    ap.add_argument("--tf32", nargs="+", help="suite.json files of tf32 runs")
    ap.add_argument("--fp32-accurate", nargs="+",
                    help="suite.json files of runs with fp32-accurate convolutions (suite_h100.sh CONV_NUMERICS=3xtf32)")
    ap.add_argument("--device", required=True)
    ap.add_argument("--commit", default=None, help="the binary's commit (default: this checkout's)")
    ap.add_argument("--note", default="", help="how the suites were run (calls, settings, what is missing)")
    ap.add_argument("-o", "--output", required=True, help="path without extension")
    ap.add_argument("--benchmark", choices=tuple(BENCHMARKS), default="fusion")
    ap.add_argument("--only-listed", action="store_true",
                    help="keep only the problems of the benchmark's list (a suite that also ran the other benchmark's)")
    ap.add_argument("--models", nargs="*", default=[],
                    help="unpacked `fact optimize` output folders of whole models (report.json): rows models/<file>")
    ap.add_argument("--suite-dirs", nargs="*", default=[],
                    help="unpacked suite folders (suite.tgz): each problem's patterns, FACT's kernel vs PyTorch's ms")
    a = ap.parse_args()
    if not a.default and not a.tf32 and not a.fp32_accurate and not a.models:
        ap.error("name at least one suite.json (--default, --tf32 or --fp32-accurate) or model folder (--models)")
    previous = json.loads(Path(a.previous).read_text()) if a.previous else None
    models, model_kernels = model_rows(a.models)
    named = {"default": a.default, "tf32": a.tf32 or [], "fp32_accurate": a.fp32_accurate or []}
    measured = {mode: [json.loads(Path(f).read_text()) for f in files] for mode, files in named.items()}
    for mode, files in named.items():
        for f, suite in zip(files, measured[mode]):
            want = "3xtf32" if mode == "fp32_accurate" else "tf32"
            if suite.get("conv_numerics", "tf32") != want:
                ap.error(f"{f}: its convolutions ran {suite['conv_numerics']}, not {want} as --{mode.replace('_', '-')} "
                         f"takes")
    measured["default"].append(models)
    suites = suites_of_report(previous) if previous else {m: [] for m in MODES}
    for mode in MODES:
        suites[mode] += measured[mode]
    commit = a.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True).stdout.strip()
    doc = build(suites, a.device, commit, a.benchmark, a.only_listed)
    doc["note"] = a.note
    # A problem not re-measured in a mode keeps its earlier per-pattern rows of that mode; a re-measured one has only
    # the rows its own run left (none where its report.json did not come back), never an earlier kernel's.
    remeasured = {(p["id"], mode) for mode, files in measured.items() for suite in files for p in suite["problems"]
                  if p.get("status") in MEASURED}
    kernels = {}
    for p in (previous or {}).get("problems", []):
        kept = [k for k in p.get("kernels") or [] if (p["id"], kernel_mode(k)) not in remeasured]
        if kept:
            kernels[p["id"]] = kept
    for pid, rows in list(kernel_rows(a.suite_dirs).items()) + list(model_kernels.items()):
        modes = {kernel_mode(r) for r in rows}
        kernels[pid] = [k for k in kernels.get(pid, []) if kernel_mode(k) not in modes] + rows
    for p in doc["problems"]:
        if p["id"] in kernels:
            p["kernels"] = kernels[p["id"]]
    Path(a.output + ".json").write_text(json.dumps(doc, indent=1) + "\n")
    Path(a.output + ".md").write_text(markdown(doc))
    print(markdown(doc).split("## Per problem")[0])


if __name__ == "__main__":
    main()
