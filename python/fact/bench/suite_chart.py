"""Draws a `fact bench` suite.json as one PNG: each problem's speedup over eager PyTorch (and over
torch.compile where measured) on a log axis, grouped by level and coloured by outcome, and per level
fast_p and the geometric mean.

Usage: python -m fact.bench.suite_chart suite.json -o suite.png
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

COLOURS = {"correct": "#2a9d4b", "incorrect": "#d1495b", "failed": "#8d5a97", "not_measured": "#b0b0b0",
           "not_run": "#d8d8d8"}


def draw(suite: dict, png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = suite["problems"]
    levels = [lv for lv in suite["levels"] if lv["level"] != "all"]
    fig, (ax, ax_lv) = plt.subplots(2, 1, figsize=(max(8.0, 0.32 * len(problems) + 2), 9),
                                    gridspec_kw={"height_ratios": [3, 1.3]})
    xs = range(len(problems))
    # Unmeasured problems get no bar, only their label: a missing time is never drawn as 0 or as 1x.
    eager = [p["speedup_eager"] or 0.0 for p in problems]
    compiled = [p["speedup_compile"] or 0.0 for p in problems]
    ax.bar([x - 0.2 for x in xs], eager, 0.4, color=[COLOURS[p["status"]] for p in problems], label="vs eager")
    if any(compiled):
        ax.bar([x + 0.2 for x in xs], compiled, 0.4, color="#457b9d", label="vs torch.compile")
    ax.axhline(1.0, color="black", linewidth=0.8)
    if any(eager) or any(compiled):
        ax.set_yscale("log")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{p['id']} ({p['status']})" if p["status"] != "correct" else p["id"] for p in problems],
                       rotation=75, ha="right", fontsize=7)
    ax.set_ylabel("speedup (x, log)")
    ax.set_title(f"FACT bench: {suite['suite_dir']} ({suite['arch']}, numerics {suite['numerics']})")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    ax.legend(handles + ([plt.Rectangle((0, 0), 1, 1, color="#457b9d")] if any(compiled) else []),
              [f"vs eager: {s}" for s in COLOURS] + (["vs torch.compile"] if any(compiled) else []), fontsize=7)

    names = [lv["level"] for lv in levels]
    width = 0.2
    for i, key in enumerate(["fast_1.0", "fast_1.5", "fast_2.0"]):
        values = [lv["fast_p"][key]["vs_eager"] or 0.0 for lv in levels]
        ax_lv.bar([j + (i - 1) * width for j in range(len(levels))], values, width, label=key)
    ax_lv.set_xticks(range(len(levels)))
    ax_lv.set_xticklabels([f"{lv['level']}\n{lv['measured']}/{lv['problems']} measured, geomean "
                           + (f"{lv['geomean_speedup_eager']:.2f}x" if lv["geomean_speedup_eager"] else "—")
                           for lv in levels], fontsize=8)
    ax_lv.set_ylim(0, 1)
    ax_lv.set_ylabel("fast_p vs eager")
    ax_lv.legend(fontsize=7)
    if not names:
        ax_lv.set_visible(False)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("suite", type=Path)
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args()
    try:
        suite = json.loads(args.suite.read_text())
    except (OSError, json.JSONDecodeError) as e:
        print(f"suite_chart: cannot read {args.suite}: {e}", file=sys.stderr)
        return 2
    if suite.get("format") != "fact-bench-suite":
        print(f"suite_chart: {args.suite} is not a fact bench suite.json (format {suite.get('format')!r})", file=sys.stderr)
        return 2
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("suite_chart: matplotlib is not installed here (pip install -r python/requirements.txt); "
              "suite.json and suite.md are complete without the chart", file=sys.stderr)
        return 3
    draw(suite, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
