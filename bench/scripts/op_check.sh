#!/usr/bin/env bash
# Op library on the device: the winners of tune reports written earlier in the same command become
# torch.ops.fact.* in one libfact_ops.so, which is built, loaded and checked (reference, meta/fake,
# opcheck, torch.compile, time vs torch.matmul). Prints the op_check table last.
# Usage (device): bash bench/scripts/op_check.sh $OUT/work/tune-a.json [$OUT/work/tune-b.json ...]
set -uo pipefail
source bench/scripts/device_env.sh
[ $# -ge 1 ] || { echo "usage: bash bench/scripts/op_check.sh TUNE_REPORT.json [...]"; exit 2; }
for r in "$@"; do [ -f "$r" ] || { echo "op_check.sh: no tune report at $r (did the tune step fail?)"; exit 2; }; done
mkdir -p "$OUT/work"
"$FACT_BIN" ops build "$@" --out "$OUT/ops" --compile --jobs "$(nproc)" > "$OUT/work/ops_build.log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then
  python3 -m fact.realize.op_check "$OUT/ops" -o "$OUT/op_check.json" > "$OUT/op_check.txt" 2>&1
  rc=$?
else
  echo "fact ops build failed (exit $rc):" > "$OUT/op_check.txt"
  tail -n 60 "$OUT/work/ops_build.log" >> "$OUT/op_check.txt"
fi
# $OUT returns at most 8 files: the folder's sources and logs travel as one archive (no objects, no .so).
parts=$(cd "$OUT" && ls -d ops work 2>/dev/null)
tar -C "$OUT" --exclude='*.o' --exclude='*.so' -czf "$OUT/ops_work.tgz" $parts && rm -rf "$OUT/ops" "$OUT/work"
echo "=== fact ops build + op_check (exit $rc)"
cat "$OUT/op_check.txt"
exit $rc
