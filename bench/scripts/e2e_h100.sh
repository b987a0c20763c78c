#!/usr/bin/env bash
# End to end on the device: discover -> tune -> op library -> compose -> check and time against eager.
# Usage (device): bash bench/scripts/e2e_h100.sh [problem.py] [numerics] [top]
set -uo pipefail
source bench/scripts/device_env.sh
problem=${1:-bench/problems/level3/minigpt_block.py}
n=${2:-tf32}
top=${3:-4}
w="$OUT/work"
mkdir -p "$w"
"$FACT_BIN" discover "$problem" --numerics "$n" --json "$w/plan.json" > "$w/discover.txt" 2>&1 || { cat "$w/discover.txt"; exit 1; }
"$FACT_BIN" tune "$w/plan.json" --numerics "$n" --top "$top" --report "$w/tune.json" --work-dir "$w" 2> "$w/tune.log"
"$FACT_BIN" ops build "$w/tune.json" --out "$w/ops" --compile --jobs "$(nproc)" > "$w/ops.log" 2>&1 || tail -n 30 "$w/ops.log"
"$FACT_BIN" compose "$w/plan.json" "$w/tune.json" --model "$problem" --out "$w/composed" --op-library "$w/ops/libfact_ops.so" \
  > "$w/compose.log" 2>&1 || tail -n 30 "$w/compose.log"
python3 -m fact.compose.e2e_check "$w/composed" --lib "$w/ops/libfact_ops.so" --numerics "$n" -o "$OUT/e2e.json" \
  > "$w/e2e.log" 2>&1
rc=$?
tar -C "$OUT" --exclude='*.o' --exclude='*.so' -czf "$OUT/e2e_work.tgz" work && rm -rf "$w"
cat "$OUT/e2e.json" 2>/dev/null || echo "e2e_check failed (exit $rc); see e2e_work.tgz/work/e2e.log"
exit $rc
