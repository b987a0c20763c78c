"""Puts the repository's python/ folder on sys.path so tests import `fact` from this checkout; gives the tests that
compile C against the kernel ABI its header, as the `fact` binary renders it from the data."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO_ROOT / "python"
FACT_BIN = Path(os.environ.get("FACT_BIN") or REPO_ROOT / "build" / "fact")

if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


@pytest.fixture(scope="session")
def kernel_abi_include(tmp_path_factory) -> Path:
    """A folder holding kernel_abi.h, written by `fact ops abi-header` (src/realize/kernel_abi_header.cpp)."""
    if not (FACT_BIN.is_file() and os.access(FACT_BIN, os.X_OK)):
        pytest.skip(f"fact binary not found at {FACT_BIN} (build it, or set FACT_BIN): it renders kernel_abi.h")
    folder = tmp_path_factory.mktemp("kernel_abi")
    subprocess.run([str(FACT_BIN), "ops", "abi-header", "--out", str(folder / "kernel_abi.h")], check=True)
    return folder


def hf_llama_file(tmp_path: Path, dtype: str) -> Path:
    """tests/python/data/open_world/hf_llama.py with its weights in `dtype` (float32, bfloat16), written to tmp_path."""
    source = (REPO_ROOT / "tests" / "python" / "data" / "open_world" / "hf_llama.py").read_text()
    assert 'return ["float32"]' in source
    path = tmp_path / f"hf_llama_{dtype}.py"
    path.write_text(source.replace('return ["float32"]', f'return ["{dtype}"]'))
    return path
