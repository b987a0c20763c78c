#!/usr/bin/env bash
# One whole model (bench/models/*.py: torchvision's ResNet-50, MobileNetV2, ...) through `fact optimize` on the device,
# resumable over calls: the tuning database of the previous call, carried in .bench-state/<model>.sqlite, keeps every
# workload tuned so far (its winners spend none of the tuning budget).
# Usage (device): [BUDGET=s] [LIMIT=s] [TOP=n] [PROFILE=1] [CONV_NUMERICS=3xtf32] bash bench/scripts/model_h100.sh bench/models/tv_resnet50.py
#   CONV_NUMERICS=3xtf32: fp32-accurate convolutions, against cuDNN with TF32 off (default: TF32, PyTorch's).
#   PROFILE=1: the end-to-end check also writes profile.json (each variant's CUDA kernels, ms a call).
#   TOP: candidates measured per pattern (1: the ranking's first; more for workloads removed from a carried database
#   to be tuned again: `build/fact db list --db .bench-state/<model>.sqlite`, then `build/fact db forget ID...` or
#   `build/fact db forget --matching "groups=" --db ...`).
#   Carry .devbin, .cutlass and, from the second call on, .bench-state (copy $OUT/<model>.sqlite there).
# Returns in $OUT: <model>.tgz (the optimize folder without binaries: report.json/md, tune.json, e2e.log, ...) and
# <model>.sqlite (the tuning database). Merge: fusion_report.py --benchmark conv --models <unpacked folder>.
set -uo pipefail
source bench/scripts/device_env.sh
model=${1:?usage: model_h100.sh MODEL.py}
name=$(basename "$model" .py)
out="$OUT/$name"
mkdir -p "$out"
[ -f ".bench-state/$name.sqlite" ] && cp ".bench-state/$name.sqlite" "$out/tuning.sqlite" && echo "resuming from .bench-state/$name.sqlite"
# torch.compile default and reduce-overhead are timed, max-autotune (minutes of compiling a model) is not; the
# end-to-end check times the composed module op by op and as one CUDA graph and delivers the faster (replay.json).
extra=()
[ "${PROFILE:-0}" = 1 ] && extra=(--profile-kernels)
[ -n "${CONV_NUMERICS:-}" ] && extra+=(--conv-numerics "$CONV_NUMERICS")
timeout "${LIMIT:-540}" "$FACT_BIN" optimize "$model" --out "$out" --top "${TOP:-1}" \
  --tune-budget "${BUDGET:-360}" --no-max-autotune "${extra[@]}" --db "$out/tuning.sqlite" > "$out/log.txt" 2>&1
echo "optimize exit $?"
grep -E "e2e_check: |falling back|Fell back" "$out/e2e.log" "$out/log.txt" | grep -v "profile:" | head -12
grep -h "e2e_check: profile:" "$out/e2e.log" | head -60
cp "$out/tuning.sqlite" "$OUT/$name.sqlite"
(cd "$OUT" && tar czf "$name.tgz" --exclude='*.so' --exclude='tune-work' "$name" && rm -rf "$name")
