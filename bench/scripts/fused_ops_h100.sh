#!/usr/bin/env bash
# Non-GEMM fused kernels on the device: for the MiniGPT and Llama blocks, in each numerics mode, discover
# and tune only the normalization, attention and rope patterns (GEMM rows are gemm_h100.sh's job). Norms and
# rope in a tf32 plan run in fp32 (TF32 is a matmul mode); attention runs in tf32 / bf16. Every candidate is
# verified against float64 before it is timed: attention also at odd sequence lengths (333, 77), rope at
# seq 1, 77 and 333 besides the problem's own (x read through the module's transposed q/k views), norms also
# at 37 rows. Rows (FACT vs the fastest PyTorch way, same numerics, rel err vs float64) go to
# $OUT/fused_ops_rows.json, mergeable into bench/results/fused_h100.json (fused_ops_report.py --merge).
# The problem "add_norm" stands for the residual add + LayerNorm / RMSNorm models of add_norm_models.py (the
# MiniGPT and Llama-3 block shapes and odd rows/widths, the sum returned too): each add-norm op is verified on
# both outputs (normed and sum) vs float64 and timed vs PyTorch's add + norm in its dtype.
# Usage (device): bash bench/scripts/fused_ops_h100.sh ["tf32 bf16"] ["minigpt_block llama3_block"] [top] \
#                   ["normalization attention rope"]
#   RoPE alone (head dims 128 and 64): bash bench/scripts/fused_ops_h100.sh "tf32 bf16" "llama3_block llama_block_small" 6 rope
#   add-norm:     bash bench/scripts/fused_ops_h100.sh "fp32 bf16 fp16" add_norm 4 normalization
set -uo pipefail
source bench/scripts/device_env.sh
numerics_list=${1:-"tf32 bf16"}
problems=${2:-"minigpt_block llama3_block"}
top=${3:-6}
families=${4:-"normalization attention rope"}
family_args=""
for f in $families; do family_args="$family_args --family $f"; done
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
    "$FACT_BIN" tune "$plan" --numerics "$n" --top "$top" $family_args \
      --report "$w/tune-$p-$n.json" --work-dir "$w" 2> "$w/tune-$p-$n.log" || tail -n 20 "$w/tune-$p-$n.log"
    grep -E "^\[|->" "$w/tune-$p-$n.log" | cut -c1-220
  done
done
python3 bench/scripts/fused_ops_report.py "$w" --out "$OUT/fused_ops_rows.json"
rc=$?
tar -C "$OUT" --exclude='*.so' -czf "$OUT/fused_ops_work.tgz" work && rm -rf "$w"
exit $rc
