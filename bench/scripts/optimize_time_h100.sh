#!/usr/bin/env bash
# How long `fact optimize` takes on the device, cold and warm (issue: the whole optimize of the built-in MiniGPT
# example with a warm tuning database in <= 30 s). Runs optimize three times in one call, on one machine:
#   cold      empty tuning DB (unless .devcache/tuning.sqlite was carried) and empty kernel cache: tunes;
#   warm      the same command again: tuning DB and kernel cache warm;
#   warm-fact the same, without timing torch.compile (its compile time is PyTorch's, not FACT's).
# Each run's wall time, exit status and report.json come back as $OUT/optimize_time.tgz (+ tuning.sqlite);
# bench/scripts/optimize_time_report.py turns them into bench/results/optimize_time_h100.{json,md}.
# Usage (device): bash bench/scripts/optimize_time_h100.sh [NUMERICS] [PROBLEM.py]
set -uo pipefail
source bench/scripts/device_env.sh
n=${1:-tf32}
file=${2:-bench/problems/level3/minigpt_block.py}
export FACT_TUNING_DB=/tmp/fact-time-tuning.sqlite
rm -f "$FACT_TUNING_DB"
carried=0
[ -f .devcache/tuning.sqlite ] && cp .devcache/tuning.sqlite "$FACT_TUNING_DB" && carried=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p "$OUT/work"
run() {  # NAME LIMIT_S FLAGS...
  local name=$1 limit=$2; shift 2
  local dir=/tmp/fact-time/$name
  rm -rf "$dir"
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout -k 10 "$limit" "$FACT_BIN" optimize "$file" --numerics "$n" --top 4 --no-max-autotune --out "$dir" "$@" \
    > "$OUT/work/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  mkdir -p "$OUT/work/$name"
  cp "$dir"/report.json "$dir"/report.md "$dir"/*.log "$OUT/work/$name/" 2>/dev/null
  python3 - "$name" "$t0" "$t1" "$rc" "$carried" "$OUT/work/$name/run.json" "$@" <<'PY'
import json, sys
name, t0, t1, rc, carried, path, *flags = sys.argv[1:]
json.dump({"run": name, "wall_s": float(t1) - float(t0), "exit": int(rc), "tuning_db_carried": carried == "1",
           "flags": flags}, open(path, "w"))
PY
  echo "$name: exit $rc after $(python3 -c "print(round($t1 - $t0, 1))") s"
  # After every run, so a call cut off by its time limit still brings back the runs it finished.
  cp "$FACT_TUNING_DB" "$OUT/tuning.sqlite" 2>/dev/null
  tar -C "$OUT" -czf "$OUT/optimize_time.tgz" work
}
run cold "${COLD_LIMIT_S:-330}"
run warm 120
run warm-fact 100 --no-compile-baselines
rm -rf "$OUT/work"
