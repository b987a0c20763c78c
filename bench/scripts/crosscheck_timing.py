"""Cross-checks fact.realize.timing against triton.testing.do_bench on cuBLAS GEMMs (GPU only).

time_launches rotates input sets (>= 2x L2) and holds the GPU busy while the host enqueues a sample;
do_bench clears L2 before every timed call. Both report medians; they should agree within a few
percent where the GEMM is not L2-bound. Usage: PYTHONPATH=python python3 bench/scripts/crosscheck_timing.py
"""
import sys

import torch
import triton.testing

from fact.realize import timing
from fact.realize.gemm_case import GemmCase, GemmProblem, torch_epilogue_gemm

CASES = [(1024, "float32", "fp32", "highest"), (1024, "bfloat16", "bf16", "highest"),
         (4096, "float32", "tf32", "high"), (4096, "bfloat16", "bf16", "highest"),
         (256, "bfloat16", "bf16", "highest")]


def main() -> int:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    print(f"{'problem':<26} {'time_launches ms':>17} {'repeat':>8} {'do_bench ms':>12} {'ratio':>7}")
    for size, dtype, numerics, precision in CASES:
        torch.set_float32_matmul_precision(precision)
        p = GemmProblem(size, size, size, 1, "row", "row", dtype, numerics, "none")
        case = GemmCase(p)
        n_sets = timing.rotation_count(case.bytes_per_set(), l2)
        sets = [case.make_inputs("cuda") for _ in range(n_sets)]
        fn = lambda i: torch_epilogue_gemm(p, sets[i])  # noqa: E731
        first = timing.time_launches(fn, n_sets, 25, 200).ms
        again = timing.time_launches(fn, n_sets, 25, 200).ms
        db = triton.testing.do_bench(lambda: fn(0), warmup=25, rep=200, return_mode="median")
        print(f"{size}^3 {dtype}/{numerics:<6} ({n_sets:>3} sets) {first:>10.5f} {again:>8.5f} {db:>12.5f} "
              f"{first / db:>7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
