#!/usr/bin/env bash
# FACT's attention kernel on the device: build the config space, verify, time against PyTorch SDPA.
# Usage (device): bash bench/scripts/attention_h100.sh [--numerics tf32,bf16] [--head-dims 96,128]
set -uo pipefail
source bench/scripts/device_env.sh
python3 bench/scripts/attention_h100.py --out "$OUT" --jobs "$(nproc)" "$@"
