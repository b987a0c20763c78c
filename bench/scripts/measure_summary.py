"""Prints what the GEMM tuner measured in a device run, one block per workload: the problem, PyTorch's time
and error in the same numerics, and each candidate's status, time and relative Frobenius error vs float64.
3xtf32 blocks also show the fp32-accuracy gate the tuner applies (src/realize/families/gemm/gemm_family.cpp (accuracy_shortfall): at most twice
PyTorch fp32's own error) and whether each candidate meets it, since a candidate over it is dropped there.

Usage: python3 bench/scripts/measure_summary.py WORK_DIR   (the --work-dir of `fact tune`)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

FP32_GATE = 2.0  # src/realize/families/gemm/gemm_family.cpp (accuracy_shortfall): rel_err > 2 * fp32_reference_err is accuracy_failed


def fmt(x, spec: str = ".4g") -> str:
    return "-" if x is None else format(x, spec)


def block(result: dict) -> list[str]:
    p = result.get("problem") or {}
    lines = [f"== {p.get('batch', 1)}x{p.get('m')}x{p.get('n')}x{p.get('k')} (batch x M x N x K) "
             f"{p.get('epilogue')} {p.get('numerics')} on {result.get('device')}"]
    b = result.get("baseline") or {}
    base_ms = b.get("ms")
    lines.append(f"baseline {b.get('name')} ({b.get('precision')}): {fmt(base_ms)} ms, rel_err {fmt(b.get('rel_err'), '.3e')}")
    gate = None
    if p.get("numerics") == "3xtf32" and result.get("fp32_reference_err") is not None:
        gate = FP32_GATE * result["fp32_reference_err"]
        lines.append(f"PyTorch fp32 rel_err {result['fp32_reference_err']:.3e}: fp32-accuracy gate {gate:.3e}")
    lines.append(f"{'candidate':<34} {'status':<16} {'ms':>9} {'vs base':>8} {'rel_err':>10}  fp32-accurate")
    for c in result.get("candidates", []):
        ms, err = c.get("ms"), c.get("rel_err")
        speedup = f"{base_ms / ms:.2f}x" if ms and base_ms else "-"
        accurate = "-" if gate is None or err is None else ("yes" if err <= gate else "NO")
        lines.append(f"{c['id'][:34]:<34} {c.get('status', ''):<16} {fmt(ms):>9} {speedup:>8} {fmt(err, '.3e'):>10}  {accurate}")
        if c.get("status") != "ok" and c.get("message"):
            lines.append(f"    {c['message'][:200]}")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    results = sorted(Path(argv[1]).glob("measure-*-result.json"))
    if not results:
        print(f"no measure-*-result.json in {argv[1]}: nothing was measured (see the tune logs there)")
        return 1
    for path in results:
        print("\n".join(block(json.loads(path.read_text()))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
