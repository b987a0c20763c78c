#!/usr/bin/env bash
# The generic-fusion benchmark (issue 16) on the device: `fact bench` over the KernelBench problems that
# bench/fusion_problems.json lists (level-2 chains starting at a GEMM, level-1 pointwise / reduction /
# normalization / softmax / loss problems; chosen from their graphs by bench/scripts/fusion_problems.py), in one
# numerics mode, resumable over several 10-minute calls through suite_h100.sh.
# Here (once): `python bench/scripts/fusion_problems.py -o bench/fusion_problems.json` and
#   `bash bench/scripts/fusion_h100.sh --stage` copies those problems into the ignored .kb/fusion/ (KernelBench never
#   enters the repo); carry .devbin, .cutlass, .kb and, from the second call on, .bench-state (the previous suite.tgz).
# Usage (device): [SET=conv] [JOBS=n] [LEVEL=level1|level2] bash bench/scripts/fusion_h100.sh default|tf32 [top]
#   SET=conv runs the convolution benchmark of issue 17 instead (bench/conv_problems.json, staged in .kb/conv by
#   `SET=conv bash bench/scripts/fusion_h100.sh --stage`; fusion_problems.py --set conv lists it).
#   "default": each problem's own numerics (3xtf32 for fp32 models: fp32-accurate, as PyTorch's fp32 matmuls).
#   LEVEL runs one level only (tf32 changes only matmuls, so the tf32 run needs level2 alone).
# Then here: python bench/scripts/fusion_report.py --default <suite.json> --tf32 <suite.json> -o bench/results/fusion_h100
set -uo pipefail
set_name=${SET:-fusion}
if [ "${1:-}" = --stage ]; then
  kb=${KERNELBENCH_DIR:-../shared/kernelbench}
  rm -rf ".kb/$set_name" && mkdir -p ".kb/$set_name/level1" ".kb/$set_name/level2"
  python3 -c 'import json,sys; [print(p["id"]) for p in json.load(open(sys.argv[1]))["problems"]]' \
    "bench/${set_name}_problems.json" | while read -r id; do cp "$kb/$id" ".kb/$set_name/$id"; done
  echo "staged $(ls ".kb/$set_name/level1" | wc -l) level-1 and $(ls ".kb/$set_name/level2" | wc -l) level-2 problems in .kb/$set_name"
  exit 0
fi
[ -d ".kb/$set_name" ] || { echo "no .kb/$set_name: run 'SET=$set_name bash bench/scripts/fusion_h100.sh --stage' here and carry .kb"; exit 2; }
exec bash bench/scripts/suite_h100.sh ".kb/$set_name${LEVEL:+/$LEVEL}" "${1:-default}" "${2:-1}"
