"""The generated-kernel harness (fact.agent.verify_rowwise): the float64 replay of a fragment equals the module,
ABI problems and a missing GPU give clear verdicts, and (GPU only) a real kernel is verified and a wrong one
caught. (The FactRowwiseArgs mirror is checked against the C header with every family's in test_measure.py.)"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fact.agent import fragment_replay, verify_rowwise

REPO_ROOT = Path(__file__).resolve().parents[2]
IR = REPO_ROOT / "tests" / "cpp" / "data" / "agent" / "swish_absmax_ir.json"
PROBLEM = REPO_ROOT / "bench" / "problems" / "level2" / "swish_absmax_rows.py"
REPLIES = REPO_ROOT / "bench" / "scripts" / "agent_replies"


def fragment(rows=16384, cols=4096) -> dict:
    g = json.loads(IR.read_text())
    nodes = [{k: n.get(k, {} if k == "kwargs" else None) for k in ("name", "op", "args", "kwargs")}
             for n in g["nodes"] if n["kind"] == "op"]
    return {"nodes": nodes, "inputs": [{"name": "x", "shape": [rows, cols], "broadcast": False}], "output": "div",
            "rows": rows, "cols": cols, "dtype": "float32"}


def test_float64_replay_equals_the_module():
    spec = importlib.util.spec_from_file_location("swish_problem", PROBLEM)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = torch.randn(8, 4096, dtype=torch.float64)
    ref = mod.Model(*mod.get_init_inputs())(x)
    got = fragment_replay.replay(fragment(8, 4096), [x])
    torch.testing.assert_close(got, ref, rtol=0, atol=0)
    errs = fragment_replay.relative_errors(got.float(), ref)
    assert errs["max_rel_err"] < 1e-6 and errs["worst_element"][1] < 4096


def c_library(tmp_path, include: Path, symbol: str) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler (gcc/cc) on PATH")
    src = tmp_path / "k.c"
    src.write_text(f'#include "kernel_abi.h"\nint {symbol}(const FactRowwiseArgs* a) {{ return a->rows < 0; }}\n')
    lib = tmp_path / "k.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-I", str(include), str(src), "-o", str(lib)], check=True)
    return lib


def verdict(tmp_path, lib, kernel_id, frag) -> dict:
    (tmp_path / "f.json").write_text(json.dumps(frag))
    out = tmp_path / "v.json"
    assert verify_rowwise.main(["--fragment", str(tmp_path / "f.json"), "--library", str(lib), "--id", kernel_id,
                                "-o", str(out)]) == 0
    return json.loads(out.read_text())


def test_missing_entry_point_is_an_abi_verdict(tmp_path, kernel_abi_include):
    v = verdict(tmp_path, c_library(tmp_path, kernel_abi_include, "fact_other_run"), "swish_absmax_rows", fragment())
    assert v["status"] == "abi" and "fact_swish_absmax_rows_run" in v["message"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU machine's verdict; this machine has a GPU")
def test_without_gpu_the_verdict_says_so(tmp_path, kernel_abi_include):
    v = verdict(tmp_path, c_library(tmp_path, kernel_abi_include, "fact_swish_absmax_rows_run"), "swish_absmax_rows", fragment())
    assert v["status"] == "no_gpu" and "no CUDA GPU" in v["message"]


def nvcc() -> str | None:
    return shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="numeric verification runs kernels: needs a CUDA GPU")
@pytest.mark.skipif(nvcc() is None, reason="needs nvcc")
@pytest.mark.parametrize("source,status", [("simple.cu", "passed"), ("cute_wrong.cu", "mismatch")])
def test_real_kernel_is_verified_and_a_wrong_one_caught(tmp_path, kernel_abi_include, source, status):
    import cutlass_library
    cutlass = Path(cutlass_library.__file__).parent / "source" / "include"
    cc = torch.cuda.get_device_capability()
    arch = f"sm_{cc[0]}{cc[1]}" + ("a" if cc[0] == 9 else "")
    lib = tmp_path / "k.so"
    subprocess.run([nvcc(), "-std=c++17", "-O3", "--expt-relaxed-constexpr", f"-arch={arch}", f"-I{cutlass}",
                    f"-I{kernel_abi_include}", "-Xcompiler=-fPIC", "-shared", str(REPLIES / source), "-o", str(lib)], check=True)
    v = verdict(tmp_path, lib, "swish_absmax_rows", fragment(1024, 4096))
    assert v["status"] == status, v["message"]
    if status == "passed":
        assert v["max_rel_err"] <= 1e-5 and v["profile"]["kernel_us"] > 0
