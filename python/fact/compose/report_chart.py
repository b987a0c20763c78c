"""The chart of a `fact optimize` report: time per variant (eager, torch.compile, torch.compile max-autotune,
FACT) and time per pattern before (PyTorch's ops) and after (FACT's kernel), as one PNG.

Reads only report.json's "e2e" and "patterns" (generic over pattern families: a row is its rule and anchor).
Prints one line saying what was drawn or why nothing was (no timing on a machine without a GPU).

Usage: python -m fact.compose.report_chart REPORT.json -o chart.png
Exit status: 0 drawn or skipped with its reason; 2 bad input or matplotlib missing.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

VARIANTS = (("eager", "eager"), ("compile_default", "torch.compile"),
            ("compile_reduce_overhead", "torch.compile\nreduce-overhead"),
            ("compile_max_autotune", "torch.compile\nmax-autotune"), ("composed", "FACT"))


def variant_times(report: dict) -> list[tuple[str, float]]:
    e2e = report.get("e2e") or {}
    return [(label, e2e[f"{key}_ms"]) for key, label in VARIANTS if isinstance(e2e.get(f"{key}_ms"), (int, float))]


def pattern_times(report: dict) -> list[tuple[str, float, float, bool]]:
    rows = []
    for p in report.get("patterns") or []:
        if isinstance(p.get("fact_ms"), (int, float)) and isinstance(p.get("pytorch_ms"), (int, float)):
            rows.append((f"{p['rule']}\n@{p['anchor']}", p["pytorch_ms"], p["fact_ms"], bool(p.get("accepted"))))
    return rows


def draw(report: dict, out: Path) -> str:
    variants, patterns = variant_times(report), pattern_times(report)
    if not variants and not patterns:
        return "chart skipped: the report has no timing (no CUDA GPU ran the end-to-end check or the tuner)"
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [p for p in (variants, patterns) if p]
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.5), squeeze=False)
    axes = list(axes[0])
    e2e = report.get("e2e") or {}
    title = f"{Path(report.get('model', '')).stem}: {e2e.get('numerics') or report.get('numerics', '')}"
    if variants:
        ax = axes.pop(0)
        labels, ms = zip(*variants)
        bars = ax.bar(labels, ms, color=["#888888"] * (len(ms) - 1) + ["#2a7ab9" if labels[-1] == "FACT" else "#888888"])
        ax.bar_label(bars, fmt="%.2f")
        ax.set_ylabel("ms per forward (CUDA-event median)")
        fallback = (e2e.get("fallback") or {}).get("applied")
        ax.set_title(f"{title}, end to end" + (" (FACT fell back to PyTorch's ops)" if fallback else ""))
    if patterns:
        ax = axes.pop(0)
        names = [p[0] for p in patterns]
        x = range(len(patterns))
        before = ax.bar([i - 0.2 for i in x], [p[1] for p in patterns], 0.4, label="PyTorch ops", color="#888888")
        after = ax.bar([i + 0.2 for i in x], [p[2] for p in patterns], 0.4, label="FACT kernel",
                       color=["#2a7ab9" if p[3] else "#c9a227" for p in patterns])
        ax.bar_label(before, fmt="%.3f", fontsize=7)
        ax.bar_label(after, fmt="%.3f", fontsize=7)
        ax.set_xticks(list(x), names, fontsize=7, rotation=20, ha="right")
        ax.set_ylabel("ms per call")
        ax.set_title(f"{title}, per pattern (FACT kernel in yellow: not used)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return f"chart written to {out}: {len(variants)} variants, {len(patterns)} patterns"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fact.compose.report_chart")
    ap.add_argument("report", type=Path)
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        report = json.loads(args.report.read_text())
    except (OSError, json.JSONDecodeError) as e:
        print(f"report_chart: cannot read {args.report}: {e}; pass the report.json `fact optimize` wrote",
              file=sys.stderr)
        return 2
    try:
        print(draw(report, args.output))
    except ImportError as e:
        print(f"report_chart: {e}; install the pinned packages: pip install -r python/requirements.txt", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
