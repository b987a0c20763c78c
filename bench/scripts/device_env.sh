# Sourced at the start of every device command (run from the repo root on the GPU machine):
# CUTLASS from the carried wheel (.cutlass/), the carried portable fact binary (.devbin/fact,
# built here by bench/scripts/build_device_binary.sh), and FACT's paths.
root="$(pwd)"
if [ ! -f /tmp/cutlass/cutlass_library/source/include/cutlass/cutlass.h ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/cutlass .cutlass/*.whl || { echo "cannot unpack .cutlass/*.whl"; exit 1; }
fi
export CUTLASS_DIR=/tmp/cutlass/cutlass_library/source
export FACT_HOME="$root"
export FACT_PYTHON="$(command -v python3)"
export FACT_BIN="$root/.devbin/fact"
export FACT_KERNEL_CACHE=/tmp/fact-kernels
export FACT_TUNING_DB="${OUT:-/tmp}/tuning.sqlite"
export PYTHONPATH="$root/python" PYTHONUNBUFFERED=1
