#!/usr/bin/env bash
# SwiGLU on the device: tunes the gemm_swiglu pattern of the Llama-3 block and of level2/swiglu_mlp.py with the
# carried fact binary. FACT = PyTorch's up GEMM, then one CUTLASS gate GEMM whose epilogue computes
# silu(gate + bias) * U; baseline = PyTorch's silu(linear) * linear in the same numerics; both verified against
# the whole subgraph in float64. Only that pattern is tuned (the plan is filtered), so a call takes minutes.
# Usage (device): [OP_CHECK=1] bash bench/scripts/fused_h100.sh ["tf32 bf16"] ["llama3_block swiglu_mlp"] [top]
# Then here: python3 bench/scripts/gemm_report.py OUT_DIR --out /tmp/swiglu --merge-into bench/results/fused_h100
set -uo pipefail
source bench/scripts/device_env.sh
numerics_list=${1:-"tf32 bf16"}
problems=${2:-"llama3_block swiglu_mlp"}
top=${3:-4}
mkdir -p "$OUT/work"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for p in $problems; do
  file=$(ls bench/problems/level*/"$p".py 2>/dev/null | head -n 1)
  [ -n "$file" ] || { echo "no bench/problems/level*/$p.py"; continue; }
  for n in $numerics_list; do
    echo "=== $p $n"
    plan="$OUT/work/plan-$p-$n.json"
    "$FACT_BIN" discover "$file" --numerics "$n" --json "$plan" > "$OUT/work/discover-$p-$n.txt" 2>&1 \
      || { cat "$OUT/work/discover-$p-$n.txt"; continue; }
    # Keep the SwiGLU pattern only: the block's other GEMMs are the GEMM benchmark's business.
    python3 - "$plan" <<'PY' || { echo "no gemm_swiglu pattern in $plan"; continue; }
import json, sys
path = sys.argv[1]
doc = json.load(open(path))
doc["patterns"] = [p for p in doc["patterns"] if p.get("rule", p.get("match", {}).get("rule")) == "gemm_swiglu"]
json.dump(doc, open(path, "w"), indent=1)
sys.exit(0 if doc["patterns"] else 1)
PY
    "$FACT_BIN" tune "$plan" --numerics "$n" --top "$top" --report "$OUT/work/tune-$p-$n.json" --work-dir "$OUT/work" \
      2> "$OUT/work/tune-$p-$n.log" || tail -n 20 "$OUT/work/tune-$p-$n.log"
  done
done
mkdir -p /tmp/fact-tune-reports && cp "$OUT"/work/tune-*.json /tmp/fact-tune-reports/ 2>/dev/null
# gemm_report.py reads gemm_work*.tgz; $OUT returns at most 8 files, so the details travel as one archive.
tar -C "$OUT" -czf "$OUT/gemm_work-swiglu.tgz" work && rm -rf "$OUT/work"
if [ "${OP_CHECK:-0}" = 1 ]; then
  bash bench/scripts/op_check.sh /tmp/fact-tune-reports/tune-*.json
fi
