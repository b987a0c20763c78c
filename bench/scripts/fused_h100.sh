#!/usr/bin/env bash
# Fused GEMM epilogues on the device: tunes only the chosen patterns (PATTERNS, default gemm_swiglu) of each
# problem with the carried fact binary, so a call takes minutes. FACT = one CUTLASS GEMM whose epilogue
# computes the pattern (SwiGLU: PyTorch's up GEMM first, then a gate GEMM computing silu(gate + bias) * U);
# baseline = PyTorch's ops in the same numerics (3xtf32: fp32 'highest'); both verified against the whole
# subgraph in float64. Prints each workload's candidates (time, rel err vs float64, fp32-accuracy gate).
# Usage (device): [PATTERNS="gemm_swiglu"] [OP_CHECK=1] bash bench/scripts/fused_h100.sh ["tf32 bf16"] ["llama3_block swiglu_mlp"] [top]
#   MiniGPT's MLP GEMM + bias + tanh-GELU, fp32-accurate:
#   PATTERNS=gemm_bias_gelu_tanh bash bench/scripts/fused_h100.sh 3xtf32 minigpt_block 4
# Then here: python3 bench/scripts/gemm_report.py OUT_DIR --out /tmp/fused --merge-into bench/results/fused_h100
set -uo pipefail
source bench/scripts/device_env.sh
numerics_list=${1:-"tf32 bf16"}
problems=${2:-"llama3_block swiglu_mlp"}
top=${3:-4}
patterns=${PATTERNS:-gemm_swiglu}
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
    # Keep the chosen patterns only: the block's other GEMMs are the GEMM benchmark's business.
    python3 - "$plan" $patterns <<'PY' || { echo "no pattern of '$patterns' in $plan"; continue; }
import json, sys
path, wanted = sys.argv[1], set(sys.argv[2:])
doc = json.load(open(path))
doc["patterns"] = [p for p in doc["patterns"] if p.get("rule", p.get("match", {}).get("rule")) in wanted]
json.dump(doc, open(path, "w"), indent=1)
sys.exit(0 if doc["patterns"] else 1)
PY
    "$FACT_BIN" tune "$plan" --numerics "$n" --top "$top" --report "$OUT/work/tune-$p-$n.json" --work-dir "$OUT/work" \
      2> "$OUT/work/tune-$p-$n.log" || tail -n 20 "$OUT/work/tune-$p-$n.log"
  done
done
python3 bench/scripts/measure_summary.py "$OUT/work"
mkdir -p /tmp/fact-tune-reports && cp "$OUT"/work/tune-*.json /tmp/fact-tune-reports/ 2>/dev/null
# gemm_report.py reads gemm_work*.tgz; $OUT returns at most 8 files, so the details travel as one archive.
tar -C "$OUT" -czf "$OUT/gemm_work-${patterns// /_}.tgz" work && rm -rf "$OUT/work"
if [ "${OP_CHECK:-0}" = 1 ]; then
  bash bench/scripts/op_check.sh /tmp/fact-tune-reports/tune-*.json
fi
