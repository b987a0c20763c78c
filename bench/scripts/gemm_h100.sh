#!/usr/bin/env bash
# GEMM benchmark on the device: for each level-1 problem and numerics mode, discover + tune with the
# carried fact binary; per-pattern reports land in $OUT, then gemm_report.py merges them.
# Usage (device): [OP_CHECK=1] [PARALLEL=1] bash bench/scripts/gemm_h100.sh "fp32 3xtf32" "square_matmul_4096 large_k_matmul" [top]
#   PARALLEL=1: one worker per numerics mode; their nvcc builds overlap, their GPU work takes turns under one GPU
#   lock (python/fact/gpu_lock.py, as fact bench's workers), so timings stay undisturbed.
set -uo pipefail
source bench/scripts/device_env.sh
numerics_list=${1:-"fp32 3xtf32 tf32 bf16"}
problems=${2:-"square_matmul_2048 square_matmul_4096 square_matmul_8192 standard_matmul batched_matmul large_k_matmul"}
top=${3:-6}
mkdir -p "$OUT/work"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
tune_all() {  # NUMERICS...
  for p in $problems; do
    file="bench/problems/level1/$p.py"
    [ -f "$p" ] && { file="$p"; p="$(basename "$p" .py)"; }  # a path to any problem file works too
    for n in "$@"; do
      echo "=== $p $n"
      plan="$OUT/work/plan-$p-$n.json"
      "$FACT_BIN" discover "$file" --numerics "$n" --json "$plan" > "$OUT/work/discover-$p-$n.txt" 2>&1 \
        || { cat "$OUT/work/discover-$p-$n.txt"; continue; }
      local t0=$SECONDS
      "$FACT_BIN" tune "$plan" --numerics "$n" --top "$top" --report "$OUT/work/tune-$p-$n.json" --work-dir "$OUT/work" \
        2> "$OUT/work/tune-$p-$n.log" || tail -n 20 "$OUT/work/tune-$p-$n.log"
      echo "=== $p $n: tune took $((SECONDS - t0)) s"
    done
  done
}
if [ "${PARALLEL:-0}" = 1 ]; then
  export FACT_GPU_LOCK=/tmp/fact-gemm-gpu.lock
  for n in $numerics_list; do tune_all "$n" > "$OUT/work/progress-$n.txt" 2>&1 & done
  wait
  cat "$OUT"/work/progress-*.txt
else
  tune_all $numerics_list
fi
# $OUT returns at most 8 files: everything detailed travels as one archive.
mkdir -p /tmp/fact-tune-reports && cp "$OUT"/work/tune-*.json /tmp/fact-tune-reports/ 2>/dev/null
tar -C "$OUT" -czf "$OUT/gemm_work.tgz" work && rm -rf "$OUT/work"
# OP_CHECK=1: the winners also become one torch.ops.fact library, checked as custom ops.
if [ "${OP_CHECK:-0}" = 1 ]; then
  bash bench/scripts/op_check.sh /tmp/fact-tune-reports/tune-*.json
fi
