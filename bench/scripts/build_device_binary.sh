#!/usr/bin/env bash
# Builds what device calls carry in .devbin/ (the device machine is another distribution, without FACT's -dev
# packages): the portable `fact` binary and, where a Python 3.12 is here (the device's Python, KINDS.md), the
# Python package as a portable wheel, both from one build folder. Run here, on the CPU machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mkdir -p .devbin
grep -q '^/.devbin/' .git/info/exclude 2>/dev/null || echo /.devbin/ >> .git/info/exclude
grep -q '^/.cutlass/' .git/info/exclude 2>/dev/null || echo /.cutlass/ >> .git/info/exclude
py=${DEVICE_PYTHON:-}
for candidate in python3.12 $(ls -d ~/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null); do
  [ -z "$py" ] && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && py=$candidate
done
if [ -n "$py" ]; then
  # The wheel's build (scikit-build-core) builds the binary too; the device installs the wheel with
  # `pip install --no-deps --no-index .devbin/fact-*.whl` (bench/scripts/python_api_h100.sh).
  if [ ! -x build-device/venv/bin/python ]; then
    "$py" -m venv build-device/venv
    build-device/venv/bin/pip install -q $(grep -E '^(scikit-build-core|nanobind)==' python/requirements.txt | cut -d' ' -f1)
  fi
  rm -f .devbin/fact-*.whl
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" build-device/venv/bin/pip wheel -q --no-build-isolation --no-deps -w .devbin \
    -C build-dir=build-device -C cmake.define.FACT_PORTABLE=ON .
else
  echo "no Python 3.12 here (set DEVICE_PYTHON): .devbin gets the binary but no wheel of the package"
  cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DFACT_PORTABLE=ON -DFACT_BUILD_TESTS=OFF >/dev/null
  cmake --build build-device -j "$(nproc)" --target fact
fi
cp build-device/fact .devbin/fact
if ! ls .cutlass/nvidia_cutlass-*.whl >/dev/null 2>&1; then
  .venv/bin/python -m pip download -q --no-deps -d .cutlass "$(grep '^nvidia-cutlass==' python/requirements.txt)"
fi
echo "ready: .devbin/ (fact$(ls .devbin/fact-*.whl >/dev/null 2>&1 && echo ' and the wheel')) and .cutlass/ (name both in the device call's carry)"
