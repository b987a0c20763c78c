#!/usr/bin/env bash
# Nsight Compute on each measured candidate of a family's patterns, on the device: the problems are tuned with --top
# TOP as `fact tune` does, then every candidate of every measurement request runs once more, alone, under ncu (its
# kernels' speed of light, pipes, warp stalls, memory), and so does PyTorch's baseline (its kernels named BASE_KERNELS).
# For where a kernel loses its time, which the tuner's times do not say.
# Usage (device): [BASE_KERNELS=regex] [NCU_METRICS=m1,m2] bash bench/scripts/profile_candidates.sh FAMILY TOP problem.py...
#   NCU_METRICS: metrics beside the sections (e.g. dram__bytes_read.sum,dram__bytes_write.sum), in the summary too.
# Returns in $OUT: <problem>.tgz (tune report, log, one ncu text report a candidate and the baseline's) and
# summary.txt (each profiled kernel's duration, SM and memory throughput, tensor pipe use, top stalls).
set -uo pipefail
source bench/scripts/device_env.sh
family=${1:?usage: profile_candidates.sh FAMILY TOP problem.py...} top=${2:?TOP}
shift 2
ncu_sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
  --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats)
[ -n "${NCU_METRICS:-}" ] && ncu_sections+=(--metrics "$NCU_METRICS")
# The candidates' own kernels: the conv/GEMM templates (device_kernel<...>), the direct kernels, their layout copies.
fact_kernels='regex:device_kernel|fact|transpose_tiles|conv_depthwise|conv_direct|conv_element|fold'
# (Not the inputs' random fills, which run first: distribution_elementwise_grid_stride_kernel.)
base_kernels="regex:^(?!.*distribution)(${BASE_KERNELS:-.*(xmma|cudnn|implicit|conv|gemm|Kernel2|triton|elementwise)})"
for p in "$@"; do
  name=$(basename "$p" .py) dir="$OUT/$name"
  mkdir -p "$dir"
  "$FACT_BIN" discover "$p" --json "$dir/plan.json" > "$dir/log.txt" 2>&1 &&
    "$FACT_BIN" tune "$dir/plan.json" --family "$family" --top "$top" --report "$dir/tune.json" \
      --work-dir "$dir/work" --db "$dir/tuning.sqlite" >> "$dir/log.txt" 2>&1
  echo "$name: tune exit $?"
  for req in "$dir"/work/*-request.json; do
    [ -f "$req" ] || continue
    stem=$(basename "$req" -request.json)
    # One request a candidate (and one for the baseline), each run once: verification and one short timing.
    python3 - "$req" "$dir/one" <<'PY'
import json, sys, pathlib
req, out = json.load(open(sys.argv[1])), pathlib.Path(sys.argv[2])
out.mkdir(exist_ok=True)
short = dict(trials=1, warmup_ms=0.1, rep_ms=0.1)
for c in req["candidates"]:
    json.dump({**req, **short, "candidates": [c], "baseline": False}, open(out / f"{c['id']}.json", "w"))
json.dump({**req, **short, "candidates": [], "baseline": True}, open(out / "baseline.json", "w"))
PY
    for one in "$dir"/one/*.json; do
      id=$(basename "$one" .json) filter=$fact_kernels
      [ "$id" = baseline ] && filter=$base_kernels
      timeout 240 ncu --clock-control none --target-processes all --kernel-name "$filter" --launch-count 4 \
        "${ncu_sections[@]}" python3 -m fact.realize.measure "$one" -o "$dir/one/$id.result" -q \
        > "$dir/$stem-$id.ncu.txt" 2>&1
      echo "$name $stem $id: ncu exit $?"
      rm -f "$one"
    done
  done
  rm -rf "$dir/work" "$dir/one" "$dir/plan.json"
done
# The lines worth reading first, per profiled kernel.
grep -H -E "^  [^ ].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Ipc Active|No Eligible|One or More Eligible|Warp Cycles Per Issued${NCU_METRICS:+|${NCU_METRICS//,/|}}" \
  "$OUT"/*/*.ncu.txt | sed "s#$OUT/##" > "$OUT/summary.txt"
for p in "$@"; do
  name=$(basename "$p" .py)
  (cd "$OUT" && tar czf "$name.tgz" "$name" && rm -rf "$name")
done
head -c 9000 "$OUT/summary.txt"
