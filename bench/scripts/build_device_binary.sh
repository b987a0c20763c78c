#!/usr/bin/env bash
# Builds the `fact` binary that runs on the device machine (another distribution without FACT's
# -dev packages) into .devbin/, which device calls carry. Run here, on the CPU machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DFACT_PORTABLE=ON >/dev/null
cmake --build build-device -j "$(nproc)" --target fact
mkdir -p .devbin && cp build-device/fact .devbin/fact
grep -q '^/.devbin/' .git/info/exclude 2>/dev/null || echo /.devbin/ >> .git/info/exclude
grep -q '^/.cutlass/' .git/info/exclude 2>/dev/null || echo /.cutlass/ >> .git/info/exclude
if ! ls .cutlass/nvidia_cutlass-*.whl >/dev/null 2>&1; then
  .venv/bin/python -m pip download -q --no-deps -d .cutlass "$(grep '^nvidia-cutlass==' python/requirements.txt)"
fi
echo "ready: .devbin/fact and .cutlass/ (name both in the device call's carry)"
