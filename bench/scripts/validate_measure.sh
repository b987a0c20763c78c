#!/usr/bin/env bash
# Validates `python -m fact.realize.measure` on a GPU machine: builds the naive ABI kernel
# (naive_gemm_abi.cu) and deliberately broken variants with nvcc for sm_90a, runs measure on
# fp32, bf16, 3xtf32 (batched, col/col, bias+tanh-GELU) and fp16 (bias+residual) problems, and
# runs the GPU tests of tests/python/test_measure.py. Expected: naive kernels ok, each bug caught
# (verify_failed / crashed / timeout), a cuBLAS baseline timed for every problem.
# Usage: bash bench/scripts/validate_measure.sh    (results under $OUT, default /tmp/fact-validate)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
OUT="${OUT:-/tmp/fact-validate}"
mkdir -p "$OUT"
build=/tmp/fact-naive
mkdir -p "$build"
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader || true

# kernel_abi.h as the tuner's kernels see it, rendered from the data by the fact binary.
"${FACT_BIN:-$root/build/fact}" ops abi-header --out "$build/include/kernel_abi.h" || { echo "cannot render kernel_abi.h"; exit 1; }

# build ID ELEMENT A_COL B_COL EPILOGUE BUG
build() {
  nvcc -O2 -std=c++17 -arch=sm_90a -shared -Xcompiler -fPIC -I "$build/include" -DFACT_ID="$1" \
    -DFACT_ELEMENT="$2" -DFACT_A_COL="$3" -DFACT_B_COL="$4" -DFACT_EPILOGUE="$5" -DFACT_NAIVE_BUG="$6" \
    bench/scripts/naive_gemm_abi.cu -o "$build/$1.so" >"$build/$1.log" 2>&1 || { echo "build $1 failed:"; cat "$build/$1.log"; }
}
t0=$(date +%s)
build naive_f32_rr        float         0 0 0 0 &
build naive_f32_rr_again  float         0 0 0 0 &
build bug_drop_k_f32      float         0 0 0 1 &
build bug_unwritten_f32   float         0 0 0 2 &
build bug_oob_f32         float         0 0 0 3 &
build bug_crash_f32       float         0 0 0 4 &
build bug_hang_f32        float         0 0 0 5 &
build needs_bias_f32      float         0 0 1 0 &
build naive_bf16_rc       __nv_bfloat16 0 1 0 0 &
build bug_drop_k_bf16     __nv_bfloat16 0 1 0 1 &
build naive_f32_cc_gelu   float         1 1 5 0 &
build naive_f16_rr_res    __half        0 0 6 0 &
wait
echo "built in $(( $(date +%s) - t0 )) s"

cand() { printf '{"id": "%s", "library": "%s/%s.so"}' "$1" "$build" "${2:-$1}"; }
cat >"$build/req_fp32.json" <<JSON
{"problem": {"m": 1024, "n": 1024, "k": 1024, "batch": 1, "layout_a": "row", "layout_b": "row",
             "dtype": "float32", "numerics": "fp32", "epilogue": "none"},
 "candidates": [$(cand naive_f32_rr), $(cand bug_drop_k_f32), $(cand bug_unwritten_f32), $(cand bug_oob_f32),
                $(cand bug_crash_f32), $(cand naive_f32_rr_again), $(cand needs_bias_f32),
                $(cand wrong_id naive_f32_rr), $(cand bug_hang_f32)],
 "trials": 3, "baseline": true, "warmup_ms": 25, "rep_ms": 200, "timeout_s": 12}
JSON
cat >"$build/req_bf16.json" <<JSON
{"problem": {"m": 1024, "n": 1024, "k": 1024, "batch": 1, "layout_a": "row", "layout_b": "col",
             "dtype": "bfloat16", "numerics": "bf16", "epilogue": "none"},
 "candidates": [$(cand naive_bf16_rc), $(cand bug_drop_k_bf16)], "trials": 3, "baseline": true}
JSON
cat >"$build/req_3xtf32.json" <<JSON
{"problem": {"m": 512, "n": 384, "k": 640, "batch": 4, "layout_a": "col", "layout_b": "col",
             "dtype": "float32", "numerics": "3xtf32", "epilogue": "bias_gelu_tanh"},
 "candidates": [$(cand naive_f32_cc_gelu)], "trials": 3, "baseline": true}
JSON
cat >"$build/req_fp16.json" <<JSON
{"problem": {"m": 256, "n": 512, "k": 1000, "batch": 2, "layout_a": "row", "layout_b": "row",
             "dtype": "float16", "numerics": "fp16", "epilogue": "bias_residual"},
 "candidates": [$(cand naive_f16_rr_res)], "trials": 3, "baseline": true}
JSON

for name in fp32 bf16 3xtf32 fp16; do
  echo "== measure $name"
  t0=$(date +%s)
  "$PY" -m fact.realize.measure "$build/req_$name.json" -o "$OUT/result_$name.json" 2>"$build/stderr_$name.txt"
  echo "exit $? in $(( $(date +%s) - t0 )) s"
done
for f in "$build"/stderr_*.txt; do echo "## $f"; cat "$f"; done >"$OUT/stderr_all.txt"

echo "== pytest (GPU tests active)"
"$PY" -m pytest -q -rs -p no:cacheprovider tests/python/test_measure.py >"$OUT/pytest.txt" 2>&1; echo "pytest exit $?"; tail -n 12 "$OUT/pytest.txt"

echo "== summary"
"$PY" - "$OUT" <<'PY'
import json, sys, pathlib
for p in sorted(pathlib.Path(sys.argv[1]).glob("result_*.json")):
    r = json.loads(p.read_text())
    b = r["baseline"] or {}
    pr = r["problem"]
    print(f"{p.stem}: {pr['m']}x{pr['n']}x{pr['k']} b{pr['batch']} {pr['dtype']}/{pr['numerics']} {pr['epilogue']} "
          f"on {r['device']} | tol {r['tolerances']['applied']:.3g} | fp32 ref err {r['fp32_reference_err']}")
    print(f"   baseline {b.get('precision')}: {b.get('status')} ms={b.get('ms')} rel={b.get('rel_err')}")
    for c in r["candidates"]:
        ms = f"{c['ms']:.4f}" if c.get("ms") else "-"
        rel = f"{c['rel_err']:.3g}" if c.get("rel_err") is not None else "-"
        print(f"   {c['id']:<20} {c['status']:<16} ms={ms:<8} rel={rel:<9} {(c.get('message') or '')[:110]}")
PY
