"""`fact discover` over every problem of KernelBench (levels 1-3), on the CPU: does FACT take every model in?

    python bench/scripts/kernelbench_discover.py [--kernelbench DIR] [--fact build/fact] [--jobs N] [-o OUT.json]

KernelBench is read from --kernelbench, else $KERNELBENCH_DIR, else ../shared/kernelbench beside the repo; it is
never copied into the repo. Writes {"date", "commit", "kernelbench", "summary", "problems": [{"id", "status": "ok" |
"error", "error", "patterns", "left_to_pytorch"}]}: "ok" means discovery produced a plan (a module torch.export
cannot trace is "ok" too, with the whole module left to PyTorch and the reason); "error" carries fact's message.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def kernelbench_dir(given: str | None) -> Path:
    for candidate in (given, os.environ.get("KERNELBENCH_DIR"), REPO.parent / "shared" / "kernelbench"):
        if candidate and Path(candidate, "level1").is_dir():
            return Path(candidate)
    sys.exit("kernelbench_discover: no KernelBench folder (pass --kernelbench DIR or set KERNELBENCH_DIR to the "
             "folder holding level1/, level2/, level3/)")


def problems(root: Path) -> list[Path]:
    def number(p: Path) -> int:
        head = p.name.split("_", 1)[0]
        return int(head) if head.isdigit() else 1 << 30
    return [p for level in sorted(root.glob("level[0-9]*")) for p in sorted(level.glob("*.py"), key=number)]


def discover(fact: Path, root: Path, path: Path, timeout: int) -> dict:
    problem_id = str(path.relative_to(root))
    with tempfile.TemporaryDirectory() as tmp:
        plan_path = Path(tmp) / "plan.json"
        try:
            run = subprocess.run([str(fact), "discover", str(path), "--json", str(plan_path)], capture_output=True,
                                 text=True, timeout=timeout, cwd=REPO)
        except subprocess.TimeoutExpired:
            return {"id": problem_id, "status": "error", "error": f"fact discover ran past {timeout} s",
                    "patterns": None, "left_to_pytorch": None}
        if run.returncode != 0 or not plan_path.is_file():
            lines = [line for line in run.stderr.splitlines() if line.startswith("fact")] or run.stderr.splitlines()
            return {"id": problem_id, "status": "error", "error": (lines[-1] if lines else f"exit {run.returncode}")[:1000],
                    "patterns": None, "left_to_pytorch": None}
        plan = json.loads(plan_path.read_text())
    return {"id": problem_id, "status": "ok", "error": None, "patterns": [p["rule"] for p in plan["patterns"]],
            "left_to_pytorch": plan.get("left_to_pytorch", ""), "notes": plan.get("notes", [])}


def commit() -> str:
    run = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                           cwd=REPO).stdout.strip()
    return run.stdout.strip() + ("+uncommitted" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernelbench")
    ap.add_argument("--fact", type=Path, default=REPO / "build" / "fact")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per problem")
    ap.add_argument("--only", help="a substring of the problem ids to run (default: all)")
    ap.add_argument("-o", "--output", type=Path, default=REPO / "bench" / "results" / "kernelbench_discover.json")
    args = ap.parse_args(argv)
    root = kernelbench_dir(args.kernelbench)
    todo = [p for p in problems(root) if not args.only or args.only in str(p.relative_to(root))]
    results = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for r in pool.map(lambda p: discover(args.fact, root, p, args.timeout), todo):
            results.append(r)
            print(f"[{len(results)}/{len(todo)}] {r['id']}: {r['status']}"
                  + (f" ({len(r['patterns'])} patterns)" if r["status"] == "ok" else f": {r['error']}"), flush=True)
    ok = sum(r["status"] == "ok" for r in results)
    whole = sum(r["status"] == "ok" and r["left_to_pytorch"].startswith("the whole module") for r in results)
    document = {"date": datetime.date.today().isoformat(), "commit": commit(), "kernelbench": str(root),
                "summary": {"problems": len(results), "ok": ok, "error": len(results) - ok,
                            "with_patterns": sum(bool(r["patterns"]) for r in results),
                            "whole_module_left_to_pytorch": whole},
                "problems": results}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=1) + "\n")
    print(json.dumps(document["summary"]))
    return 0 if ok == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
