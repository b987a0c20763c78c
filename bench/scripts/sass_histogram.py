"""Per kernel of a built object (kernel.o, kernel.so, a .cubin): its SASS instruction count, branches, the IEEE
division's FCHK checks and subroutine calls, and the most frequent opcodes. No GPU needed: it reads the SASS that
nvcc wrote, which is where a branch around every epilogue element showed (docs/perf-notes.md item 34).

    python bench/scripts/sass_histogram.py ~/.cache/fact/kernels/<hash>/kernel.o [--cuobjdump PATH] [--top 12]

cuobjdump ships with the CUDA toolkit's full install; where only nvcc is installed, PyPI's nvidia-cuda-cuobjdump
wheel holds it (`pip download --no-deps nvidia-cuda-cuobjdump -d DIR`, unzip, DIR/nvidia/cu13/bin/cuobjdump).
"""
from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys

INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);")


def kernels(sass: str) -> dict[str, list[str]]:
    """Each function's instructions (predicates dropped), from `cuobjdump --dump-sass` text."""
    out = {}
    for block in sass.split("Function : ")[1:]:
        name = block.split("\n", 1)[0].strip()
        ops = []
        for text in INSTRUCTION.findall(block):
            words = text.split()
            op = words[1] if words and words[0].startswith("@") and len(words) > 1 else (words[0] if words else "")
            if op and op != "NOP":
                ops.append(op)
        out[name] = ops
    return out


def summary(ops: list[str], top: int) -> str:
    base = collections.Counter(op.split(".")[0] for op in ops)
    common = ", ".join(f"{op} {n}" for op, n in base.most_common(top))
    return (f"{len(ops)} instructions, {base['BRA']} BRA, {base['FCHK']} FCHK, {base['CALL']} CALL, "
            f"{base['MUFU']} MUFU, {base['HGMMA']} HGMMA; {common}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("object")
    ap.add_argument("--cuobjdump", default=shutil.which("cuobjdump"), help="the cuobjdump binary (default: PATH's)")
    ap.add_argument("--top", type=int, default=12, help="opcodes listed per kernel")
    a = ap.parse_args(argv)
    if not a.cuobjdump:
        print("sass_histogram: no cuobjdump on PATH; pass --cuobjdump (see this script's help)", file=sys.stderr)
        return 2
    r = subprocess.run([a.cuobjdump, "--dump-sass", a.object], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"sass_histogram: cuobjdump failed on {a.object}: {r.stderr.strip()}", file=sys.stderr)
        return 1
    for name, ops in kernels(r.stdout).items():
        print(f"{name[:100]}\n  {summary(ops, a.top)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
