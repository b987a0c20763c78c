#!/usr/bin/env bash
# How long `fact optimize` takes on the device, cold and warm (issue 19: a level-1 GEMM problem cold in <= 60 s,
# MiniGPT in <= 240 s, warm in <= 3 s without the end-to-end timing). Per problem, three runs on one machine:
#   cold      empty tuning DB (unless .devcache/tuning.sqlite was carried), kernel and trace caches of its own: tunes;
#   warm      the same command again: tuning DB, kernel and trace caches warm;
#   warm-fact the same, without timing torch.compile (its compile time is PyTorch's, not FACT's).
# Each run's wall time, exit status and report.json come back as $OUT/optimize_time.tgz (work/<problem>/<run>/,
# + tuning.sqlite); bench/scripts/optimize_time_report.py turns them into a results table.
# Usage (device): [TOP=4] [COLD_LIMIT_S=330] bash bench/scripts/optimize_time_h100.sh [NUMERICS] [PROBLEM.py...]
set -uo pipefail
source bench/scripts/device_env.sh
n=${1:-tf32}
shift || true
files=("$@")
[ ${#files[@]} -eq 0 ] && files=(bench/problems/level3/minigpt_block.py)
top=${TOP:-4}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p "$OUT/work"
run() {  # FILE NAME LIMIT_S FLAGS...
  local file=$1 name=$2 limit=$3; shift 3
  local stem dir t0 t1 rc
  stem=$(basename "$file" .py)
  dir=/tmp/fact-time/$stem/$name
  rm -rf "$dir"
  t0=$(date +%s.%N)
  timeout -k 10 "$limit" "$FACT_BIN" optimize "$file" --numerics "$n" --top "$top" --no-max-autotune --out "$dir" "$@" \
    > "$OUT/work/$stem-$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  mkdir -p "$OUT/work/$stem/$name"
  cp "$dir"/report.json "$dir"/report.md "$dir"/*.log "$OUT/work/$stem/$name/" 2>/dev/null
  python3 - "$name" "$t0" "$t1" "$rc" "$carried" "$OUT/work/$stem/$name/run.json" "$top" "$@" <<'PY'
import json, sys
name, t0, t1, rc, carried, path, top, *flags = sys.argv[1:]
json.dump({"run": name, "wall_s": float(t1) - float(t0), "exit": int(rc), "tuning_db_carried": carried == "1",
           "top": int(top), "flags": flags}, open(path, "w"))
PY
  echo "$stem $name: exit $rc after $(python3 -c "print(round($t1 - $t0, 1))") s"
  # After every run, so a call cut off by its time limit still brings back the runs it finished.
  cp "$FACT_TUNING_DB" "$OUT/tuning-$stem.sqlite" 2>/dev/null
  tar -C "$OUT" -czf "$OUT/optimize_time.tgz" work
}
for file in "${files[@]}"; do
  stem=$(basename "$file" .py)
  # Each problem starts cold: its own tuning DB, kernel cache and trace cache (kernels are shape-agnostic, so an
  # earlier problem's builds would be cache hits).
  export FACT_TUNING_DB=/tmp/fact-time-tuning-$stem.sqlite FACT_KERNEL_CACHE=/tmp/fact-time-kernels-$stem
  export FACT_TRACE_CACHE=/tmp/fact-time-traces-$stem
  rm -rf "$FACT_TUNING_DB" "$FACT_KERNEL_CACHE" "$FACT_TRACE_CACHE"
  carried=0
  [ -f .devcache/tuning.sqlite ] && cp .devcache/tuning.sqlite "$FACT_TUNING_DB" && carried=1
  run "$file" cold "${COLD_LIMIT_S:-330}"
  run "$file" warm 120
  run "$file" warm-fact 100 --no-compile-baselines
done
rm -rf "$OUT/work"
