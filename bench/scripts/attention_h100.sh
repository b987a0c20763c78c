#!/usr/bin/env bash
# FACT's attention kernels on the device (sm80_mma: mma.sync, every mode; sm90_wgmma: Hopper wgmma, bf16/fp16;
# sm90_tma_ws: wgmma fed by TMA from a producer warpgroup, bf16/fp16):
# build the config space, verify, time against PyTorch SDPA. Writes $OUT/attention_<gpu>.{json,md} (h100, h200).
# Usage (device): bash bench/scripts/attention_h100.sh [--numerics tf32,bf16] [--head-dims 96,128]
#                 [--kernels sm80_mma,sm90_wgmma,sm90_tma_ws]
set -uo pipefail
source bench/scripts/device_env.sh
python3 bench/scripts/attention_h100.py --out "$OUT" --jobs "$(nproc)" "$@"
