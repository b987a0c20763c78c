#!/usr/bin/env bash
# Non-GEMM fused kernels on the device: for the MiniGPT and Llama blocks, in each numerics mode, discover
# and tune only the normalization and attention patterns (GEMM rows are gemm_h100.sh's job). Norms in a
# tf32 plan run in fp32 (TF32 is a matmul mode); attention runs in tf32 / bf16, and reports no_candidate
# until templates/cute/attention_fwd.cu.in is in the tree. Rows (FACT vs the fastest PyTorch way, same
# numerics, rel err vs float64) go to $OUT/fused_ops_rows.json, mergeable into bench/results/fused_h100.json.
# The problem "add_norm" stands for the residual add + LayerNorm / RMSNorm models of add_norm_models.py (the
# MiniGPT and Llama-3 block shapes and odd rows/widths, the sum returned too): each add-norm op is verified on
# both outputs (normed and sum) vs float64, also at 37 rows, and timed vs PyTorch's add + norm in its dtype
# (numerics fp32 / bf16 / fp16). The level2 problems add_layer_norm / add_rms_norm (sum not returned) work too.
# Usage (device): bash bench/scripts/fused_ops_h100.sh ["tf32 bf16"] ["minigpt_block llama3_block"] [top]
#   add-norm:     bash bench/scripts/fused_ops_h100.sh "fp32 bf16 fp16" add_norm 4
set -uo pipefail
source bench/scripts/device_env.sh
numerics_list=${1:-"tf32 bf16"}
problems=${2:-"minigpt_block llama3_block"}
top=${3:-6}
w="$OUT/work"
mkdir -p "$w"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
files=()
for p in $problems; do
  if [ "$p" = add_norm ]; then
    mapfile -t -O "${#files[@]}" files < <(python3 bench/scripts/add_norm_models.py "$w/models")
  else
    found=$(ls bench/problems/level*/"$p".py 2>/dev/null | head -n 1)
    [ -n "$found" ] && files+=("$found") || echo "no bench/problems/level*/$p.py"
  fi
done
for file in "${files[@]}"; do
  p=$(basename "$file" .py)
  for n in $numerics_list; do
    echo "=== $p $n"
    plan="$w/plan-$p-$n.json"
    "$FACT_BIN" discover "$file" --numerics "$n" --json "$plan" > "$w/discover-$p-$n.txt" 2>&1 \
      || { tail -n 20 "$w/discover-$p-$n.txt"; continue; }
    "$FACT_BIN" tune "$plan" --numerics "$n" --top "$top" --family normalization --family attention \
      --report "$w/tune-$p-$n.json" --work-dir "$w" 2> "$w/tune-$p-$n.log" || tail -n 20 "$w/tune-$p-$n.log"
    grep -E "^\[|->" "$w/tune-$p-$n.log" | cut -c1-220
  done
done
python3 bench/scripts/fused_ops_report.py "$w" --out "$OUT/fused_ops_rows.json"
rc=$?
tar -C "$OUT" --exclude='*.so' -czf "$OUT/fused_ops_work.tgz" work && rm -rf "$w"
exit $rc
