#!/usr/bin/env bash
# The problem suite on the device: `fact bench` over bench/problems (or one level folder) inside one
# 10-minute call, resumable over several calls.
# Usage (device): [MAX_AUTOTUNE=1] [JOBS=n] [PROBLEM_TIMEOUT_S=s] [CONV_NUMERICS=3xtf32] bash bench/scripts/suite_h100.sh [suite-dir] [numerics] [top]
#   CONV_NUMERICS=3xtf32: fp32 convolutions fp32-accurate, against cuDNN with TF32 off (default: TF32, PyTorch's).
#   numerics "default": each problem's own (3xtf32 for fp32 models). KernelBench, which never travels with the
#   repo, is carried as a copy in an ignored folder: `mkdir -p .kb && cp -r ../shared/kernelbench/level3 .kb/`, or some
#   problems by number (`bash bench/scripts/kb_subset.sh .kb/s1 level2 35 46`), then suite-dir .kb and carry .kb too.
#   Carry .devbin, .cutlass and, from the second call on, .bench-state holding the previous call's
#   suite.tgz: a problem finished there is skipped, an unfinished one runs again, and the tuning
#   database inside it keeps every measured kernel.
# Returns in $OUT: suite.tgz (the whole suite folder, without binaries), suite.json, suite.md, suite.png, suite.log.
set -uo pipefail
source bench/scripts/device_env.sh
dir=${1:-bench/problems}
numerics=${2:-tf32}
top=${3:-1}
# Four workers on the one GPU: their nvcc builds (most of a problem's minute) overlap, their GPU work
# takes turns under fact bench's GPU lock, so timings stay undisturbed.
jobs=${JOBS:-4}
budget=${SUITE_BUDGET_S:-360}   # no problem starts after this many seconds (those running then still finish)
hard=${SUITE_HARD_S:-540}       # then the run is stopped, leaving time to pack the results
suite="$OUT/suite"
if [ -f .bench-state/suite.tgz ]; then
  tar -xzf .bench-state/suite.tgz -C "$OUT" && echo "resuming from .bench-state/suite.tgz"
fi
mkdir -p "$suite"
# Kernels tuned by earlier device calls (e.g. e2e_h100.sh's database saved in .devcache/) are reused.
if [ ! -f "$suite/tuning.sqlite" ] && [ -f .devcache/tuning.sqlite ]; then cp .devcache/tuning.sqlite "$suite/tuning.sqlite"; fi
# torch.compile max-autotune takes minutes per model: left out unless MAX_AUTOTUNE=1 (reported as not run).
extra=()
[ "${MAX_AUTOTUNE:-0}" = 1 ] || extra+=(--no-max-autotune)
# A problem past this many seconds fails (final); one cut by the hard stop below runs again in the next call.
extra+=(--problem-timeout "${PROBLEM_TIMEOUT_S:-1800}")
numerics_flag=(--numerics "$numerics")
[ "$numerics" = default ] && numerics_flag=()
[ -n "${CONV_NUMERICS:-}" ] && numerics_flag+=(--conv-numerics "$CONV_NUMERICS")
nvidia-smi -L

# fact bench and every process it starts share one session, so the hard stop reaches all of them.
setsid "$FACT_BIN" bench "$dir" --out "$suite" "${numerics_flag[@]}" --top "$top" --resume \
  --db "$suite/tuning.sqlite" --time-budget "$budget" --jobs "$jobs" "${extra[@]}" > "$OUT/suite.stdout" 2> "$OUT/suite.log" &
sid=$!
for ((t = 0; t < hard; t += 5)); do kill -0 "$sid" 2>/dev/null || break; sleep 5; done
if kill -0 "$sid" 2>/dev/null; then
  echo "hard stop at ${hard} s: unfinished problems run again in the next call"
  pkill -TERM -s "$sid"; sleep 3; pkill -KILL -s "$sid"
fi
wait "$sid" 2>/dev/null
rc=$?
# Without a finished run the report is the one rewritten after each problem; --report-only redraws it all.
"$FACT_BIN" bench "$dir" --out "$suite" "${numerics_flag[@]}" --top "$top" --report-only >> "$OUT/suite.stdout" 2>> "$OUT/suite.log"
tar -C "$OUT" --exclude='*.so' --exclude='*.o' --exclude='*.cubin' --exclude='tune-work' -czf "$OUT/suite.tgz" suite
cp "$suite"/suite.json "$suite"/suite.md "$OUT"/ 2>/dev/null
cp "$suite"/suite.png "$OUT"/ 2>/dev/null || echo "no chart (matplotlib missing on the device?); redraw here with --report-only"
rm -rf "$suite"
cat "$OUT/suite.stdout"
grep -E '^\[[0-9]+/[0-9]+\]' "$OUT/suite.log" | tail -n 60
echo "fact bench exit: $rc"
