#!/usr/bin/env bash
# `fact discover` over all of KernelBench on the CPU -> bench/results/kernelbench_discover.json.
# Usage: bash bench/scripts/kernelbench_discover.sh [--kernelbench DIR] [--jobs N] [-o OUT.json]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
scripts/bootstrap >/dev/null
exec .venv/bin/python bench/scripts/kernelbench_discover.py "$@"
