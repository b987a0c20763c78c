"""The KernelBench problems of the generic-fusion benchmark (issue 16), chosen from their traced graphs, not by name:

- level 2: every problem whose chain starts at a GEMM (its first op that is not a view or a copy is linear, addmm,
  mm, matmul, bmm or baddbmm);
- level 1: every problem made only of pointwise ops, reductions, scans, normalizations, softmax and losses (no GEMM,
  convolution, pooling or attention op).

    python bench/scripts/fusion_problems.py [--set fusion|conv] [--kernelbench DIR] [-o OUT.json]

(--set conv: the convolution benchmark of issue 17 instead, bench/conv_problems.json.)

Traces each problem with `python -m fact.trace` on the meta device (no weights are materialized) and writes
{"kernelbench", "rules", "problems": [{"id", "ops"}], "rejected": [{"id", "why"}]} (default: stdout).
KernelBench is read from --kernelbench, else $KERNELBENCH_DIR, else ../shared/kernelbench beside the repo."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GEMM_OPS = {"aten.linear", "aten.addmm", "aten.mm", "aten.matmul", "aten.bmm", "aten.baddbmm"}
# Ops that move no data or only copy it: a chain "starts" at the first op after them (x.T, x.clone() for a residual).
VIEW_OR_COPY = {"aten.numpy_T", "aten.t", "aten.transpose", "aten.permute", "aten.view", "aten.reshape", "aten.unsqueeze",
                "aten.squeeze", "aten.expand", "aten.alias", "aten.detach", "aten.clone", "aten.contiguous",
                "aten._to_copy", "aten.flatten"}
# Op name fragments that put a level-1 problem outside this benchmark (other families and issues own them).
NOT_FUSION = ("conv", "pool", "attention", "linear", "addmm", ".mm.", "matmul", "bmm", "einsum")
RULES = {"level2": "first op that is not a view or copy is one of " + ", ".join(sorted(GEMM_OPS)),
         "level1": "no op whose name contains " + ", ".join(NOT_FUSION)}
# The convolution benchmark (issue 17, --set conv): every level-1 problem with a convolution, every level-2 chain that
# starts at one (transposed convolutions included: FACT keeps them PyTorch's, and the report says so).
CONV_OPS = ("aten.conv1d", "aten.conv2d", "aten.conv3d", "aten.convolution", "aten.conv_transpose1d",
            "aten.conv_transpose2d", "aten.conv_transpose3d")
CONV_RULES = {"level2": "first op that is not a view or copy is one of " + ", ".join(CONV_OPS),
              "level1": "an op that is one of " + ", ".join(CONV_OPS)}


def kernelbench_dir(given: str | None) -> Path:
    for candidate in (given, os.environ.get("KERNELBENCH_DIR"), REPO.parent / "shared" / "kernelbench"):
        if candidate and Path(candidate, "level1").is_dir():
            return Path(candidate)
    sys.exit("fusion_problems: no KernelBench folder (pass --kernelbench DIR or set KERNELBENCH_DIR)")


def traced_ops(path: Path) -> list[str]:
    """The graph's op names in order (aten.<op>.<overload>); raises RuntimeError with the tracer's message."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "ir.json"
        env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
        r = subprocess.run([sys.executable, "-m", "fact.trace", str(path), "-o", str(out)], env=env,
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError((r.stderr.strip().splitlines() or ["trace failed"])[-1])
        ir = json.loads(out.read_text())
    return [n["op"] for n in ir["nodes"] if n.get("kind") == "op"]


def conv_verdict(level: str, ops: list[str]) -> str | None:
    """None when the problem belongs to the convolution benchmark, else why not."""
    names = [op.rsplit(".", 1)[0] for op in ops]
    if level == "level2":
        compute = [n for n in names if n not in VIEW_OR_COPY]
        return None if compute and compute[0] in CONV_OPS else f"starts at {compute[0] if compute else 'nothing'}"
    return None if any(n in CONV_OPS for n in names) else "no convolution"


def verdict(level: str, ops: list[str]) -> str | None:
    """None when the problem belongs to the benchmark, else why not."""
    if not ops:
        return "no op in the traced graph"
    if level == "level2":
        compute = [op for op in ops if op.rsplit(".", 1)[0] not in VIEW_OR_COPY]
        if not compute:
            return "only views and copies"
        return None if compute[0].rsplit(".", 1)[0] in GEMM_OPS else f"starts at {compute[0]}"
    bad = [op for op in ops if any(f in op for f in NOT_FUSION)]
    return f"has {bad[0]}" if bad else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernelbench")
    ap.add_argument("-o", "--output")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--set", choices=("fusion", "conv"), default="fusion",
                    help="fusion: issue 16's problems (the default); conv: issue 17's")
    args = ap.parse_args()
    judge, rules = (conv_verdict, CONV_RULES) if args.set == "conv" else (verdict, RULES)
    kb = kernelbench_dir(args.kernelbench)
    files = [(lvl, p) for lvl in ("level1", "level2") for p in sorted((kb / lvl).glob("*.py"),
                                                                      key=lambda p: int(p.name.split("_")[0]))]

    def one(item):
        lvl, p = item
        pid = f"{lvl}/{p.name}"
        try:
            ops = traced_ops(p)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            return pid, None, f"trace failed: {e}"
        return pid, ops, judge(lvl, ops)

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(one, files))
    doc = {"kernelbench": str(kb), "rules": rules,
           "problems": [{"id": pid, "ops": ops} for pid, ops, why in results if why is None],
           "rejected": [{"id": pid, "why": why} for pid, ops, why in results if why is not None]}
    text = json.dumps(doc, indent=1)
    if args.output:
        Path(args.output).write_text(text + "\n")
    else:
        print(text)
    print(f"fusion_problems --set {args.set}: {len(doc['problems'])} problems, {len(doc['rejected'])} rejected", file=sys.stderr)


if __name__ == "__main__":
    main()
