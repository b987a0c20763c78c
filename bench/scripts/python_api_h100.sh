#!/usr/bin/env bash
# The Python entry points on the device (issue: FACT from Python): installs the package from the wheel that
# bench/scripts/build_device_binary.sh built here (carry .devbin and .cutlass), then runs python_api_h100.py on the
# MiniGPT block and a Hugging Face GPT-2, writing $OUT/python_api.json.
# Then here: python bench/scripts/python_api_report.py <python_api.json> -o bench/results/python_api_h100
# Usage (device): [NUMERICS=tf32] [TOP=1] [API_ARGS="--backend-only ..."] bash bench/scripts/python_api_h100.sh [MODEL.py ...]
set -uo pipefail
source bench/scripts/device_env.sh
# The installed package, as a user has it: its own data (fact/_share) and its `fact` console script.
unset FACT_HOME FACT_BIN
export PYTHONPATH=
python3 -m pip install -q --no-index --no-deps --force-reinstall .devbin/fact-*.whl || { echo "cannot install the wheel"; exit 1; }
python3 -c "import fact._core as c; print('fact._core', c.__version__, c.__file__)" || {
  ldd "$(python3 -c 'import fact, pathlib; print(next(pathlib.Path(fact.__file__).parent.glob("_core*.so")))')"; exit 1; }
nvidia-smi -L
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(bench/problems/level3/minigpt_block.py bench/models/hf_gpt2.py)
python3 bench/scripts/python_api_h100.py --out "$OUT" --numerics "${NUMERICS:-tf32}" --top "${TOP:-1}" ${API_ARGS:-} "${models[@]}" \
  2>&1 | tee "$OUT/python_api.log"
