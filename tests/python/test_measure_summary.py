"""bench/scripts/measure_summary.py, which fused_h100.sh prints at the end of a device run: per candidate
the time against PyTorch, the error against float64, and for 3xtf32 the tuner's fp32-accuracy gate."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "scripts" / "measure_summary.py"


def run(work: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(work)], capture_output=True, text=True)


def test_gate_marks_each_3xtf32_candidate(tmp_path):
    # MiniGPT's MLP GEMM as the H100 measured it before the accurate activation: 3.3 ms at 2.26e-6.
    result = {
        "device": "NVIDIA H100", "fp32_reference_err": 4.9e-7,
        "problem": {"m": 65536, "n": 3072, "k": 768, "batch": 1, "epilogue": "bias_gelu_tanh", "numerics": "3xtf32"},
        "baseline": {"name": "torch.matmul (cuBLAS) + PyTorch epilogue ops", "precision": "highest", "ms": 6.6,
                     "rel_err": 4.9e-7},
        "candidates": [
            {"id": "approx_tanh", "status": "ok", "ms": 3.3, "rel_err": 2.26e-6},
            {"id": "accurate", "status": "ok", "ms": 3.4, "rel_err": 3.1e-7},
            {"id": "broken", "status": "verify_failed", "ms": None, "rel_err": None, "message": "error over tolerance"},
        ],
    }
    (tmp_path / "measure-7-result.json").write_text(json.dumps(result))
    r = run(tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "65536x3072x768" in out and "bias_gelu_tanh 3xtf32" in out
    assert "fp32-accuracy gate 9.800e-07" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0] in
             ("approx_tanh", "accurate", "broken")}
    assert lines["approx_tanh"].rstrip().endswith("NO") and "2.00x" in lines["approx_tanh"]
    assert lines["accurate"].rstrip().endswith("yes") and "1.94x" in lines["accurate"]
    assert lines["broken"].rstrip().endswith("-")
    assert "error over tolerance" in out


def test_other_modes_have_no_gate_and_empty_dir_says_so(tmp_path):
    result = {"problem": {"m": 8, "n": 8, "k": 8, "batch": 1, "epilogue": "bias", "numerics": "tf32"},
              "fp32_reference_err": 1e-7, "baseline": {"ms": 1.0}, "candidates": [{"id": "k", "status": "ok",
                                                                                 "ms": 0.5, "rel_err": 3e-4}]}
    (tmp_path / "measure-1-result.json").write_text(json.dumps(result))
    out = run(tmp_path).stdout
    assert "gate" not in out
    assert "2.00x" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run(empty)
    assert r.returncode == 1 and "nothing was measured" in r.stdout
