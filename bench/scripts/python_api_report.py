"""bench/results/python_api_h100.{json,md} from the python_api.json files bench/scripts/python_api_h100.sh wrote on
the device (one per call; a model measured in a later file replaces its earlier fields; a run with --backend-only keeps the earlier run's other fields).

    python bench/scripts/python_api_report.py RUN.json [RUN.json ...] [--commit SHA] [--note TEXT] \
        -o bench/results/python_api_h100

Per model: wall time of fact.optimize cold (empty tuning database), taking its verified result again (reuse) and
running the pipeline again on the warm database; the milliseconds of eager, the CLI's composed module,
fact.optimize's module, torch.compile(backend="fact") and torch.compile (default), timed in one process in
interleaved rounds; each one's correctness against eager (1e-2) and relative error against float64; what the
backend used per graph. Targets (issue): fact.optimize and backend="fact" within 3% of the CLI, same correctness;
warm call <= 10 s; backend="fact" >= 1.0x torch.compile.
"""
from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

VARIANTS = ("eager", "cli_composed", "optimize", "backend_fact", "compile_default")


def cell(v, fmt="{:.3g}"):
    return "—" if v is None else fmt.format(v)


def markdown(doc: dict) -> str:
    md = [f"# FACT from Python ({doc['device']}, {doc['date']}, commit {doc['commit']})", "",
          f"Numerics: {', '.join(sorted({m.get('numerics', '?') for m in doc['models']}))} for FACT; eager and "
          f"torch.compile under float32 matmul precision '{doc['float32_matmul_precision']}'. torch {doc['torch']}, "
          f"--top {doc['top']}.", *(["", doc["note"]] if doc.get("note") else []), "",
          "## Wall time of the calls (s)", "",
          "| model | fact.optimize cold | reuse | warm database | backend first call | torch.compile first call | CLI (warm db) |",
          "|---|---|---|---|---|---|---|"]
    for m in doc["models"]:
        md.append(f"| {Path(m['model']).stem} | {cell(m.get('optimize_cold_s'))} | {cell(m.get('optimize_reuse_s'))} | "
                  f"{cell(m.get('optimize_warm_db_s'))} | {cell(m.get('backend_first_call_s'))} | "
                  f"{cell(m.get('compile_first_call_s'))} | {cell((m.get('cli') or {}).get('seconds'))} |")
    md += ["", "## Module time (ms, interleaved rounds in one process) and correctness", "",
           "| model | " + " | ".join(VARIANTS) + " | CLI / optimize | CLI / backend | torch.compile / backend |",
           "|---|" + "---|" * (len(VARIANTS) + 3)]
    for m in doc["models"]:
        ms, checks = m.get("ms") or {}, m.get("checks") or {}

        def variant(name):
            c = checks.get(name)
            if name not in ms:
                return "—"
            mark = "" if c is None else (" ok" if c["correct"] else " WRONG")
            return f"{ms[name]:.4g}{mark} (err {cell(c and c['rel_err'], '{:.1e}')})"
        def ratio(a, b):  # from the merged times, so a later --backend-only run's backend is compared
            return ms[a] / ms[b] if a in ms and b in ms else None
        md.append(f"| {Path(m['model']).stem} | " + " | ".join(variant(v) for v in VARIANTS) +
                  f" | {cell(ratio('cli_composed', 'optimize'), '{:.3f}x')} | "
                  f"{cell(ratio('cli_composed', 'backend_fact'), '{:.3f}x')} | "
                  f"{cell(ratio('compile_default', 'backend_fact'), '{:.2f}x')} |")
    md += ["", "## What ran where", ""]
    for m in doc["models"]:
        md.append(f"- {Path(m['model']).stem}: " + (f"failed: {m['error']}" if m.get("error") else
                  f"FACT ops {len(m.get('fact_ops') or [])} (CLI {len((m.get('cli') or {}).get('fact_ops') or [])}); "
                  "backend graphs: " + "; ".join(f"{g.get('used')} ({g.get('why')})"
                                                 for g in m.get("backend_graphs") or [])))
    return "\n".join(md) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--commit", default=None)
    ap.add_argument("--note", default="")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    docs = [json.loads(p.read_text()) for p in a.runs]
    models: dict[str, dict] = {}
    for d in docs:
        for m in d["models"]:
            # A later run's fields replace the earlier ones; one that ran fewer steps (--backend-only) keeps the rest.
            row = models.setdefault(m["model"], {})
            for key, value in m.items():
                if isinstance(value, dict) and isinstance(row.get(key), dict):
                    row[key] = {**row[key], **value}
                elif value is not None or key not in row:
                    row[key] = value
    doc = {**docs[-1], "models": list(models.values()), "note": a.note,
           "commit": a.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                                text=True).stdout.strip()}
    for m in doc["models"]:
        m.pop("traceback", None)
    Path(a.output + ".json").write_text(json.dumps(doc, indent=1) + "\n")
    Path(a.output + ".md").write_text(markdown(doc))
    print(markdown(doc))


if __name__ == "__main__":
    main()
