"""`fact tune --family`: the non-GEMM families go through the same tuner and report as GEMMs. On a CPU
machine the MiniGPT plan's LayerNorms are generated and compiled (build-only, in one parallel batch), and
attention is reported as no_candidate until its kernel template is in the tree."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from composed_module import REPO_ROOT, fact, needs_fact_binary

IR = REPO_ROOT / "tests" / "cpp" / "data" / "ir" / "minigpt_block.json"

pytestmark = needs_fact_binary


def test_tune_norms_build_only_and_attention_without_template(tmp_path):
    nvcc_here = shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists()
    if not nvcc_here:
        pytest.skip("nvcc is not installed: building the norm kernels needs it")
    plan = tmp_path / "plan.json"
    r = fact("discover", IR, "--numerics", "tf32", "--json", plan)
    assert r.returncode == 0, r.stderr
    env = dict(os.environ, FACT_KERNEL_CACHE=str(tmp_path / "cache"))
    report = tmp_path / "tune.json"
    r = fact("tune", plan, "--build-only", "--top", "1", "--jobs", "2", "--family", "normalization",
             "--family", "attention", "--db", tmp_path / "db.sqlite", "--report", report, env=env)
    assert r.returncode == 0, r.stderr
    # The three patterns' kernels are built in one parallel batch ahead of their own turns (the two LayerNorms share
    # one kernel: two builds, two compile slots).
    assert "building 2 kernel(s) of 3 pattern(s) in parallel" in r.stderr, r.stderr
    rows = json.loads(report.read_text())["rows"]
    assert sorted(row["pattern"] for row in rows) == ["layer_norm", "layer_norm", "sdpa_attention_manual"]
    for row in rows:
        if row["pattern"] == "layer_norm":
            assert row["family"] == "normalization"
            assert row["status"] == "built", row
            assert row["problem"]["rows"] == 128 * 512 and row["problem"]["element"] == "float32"
            assert row["built"] == 1
        else:
            assert row["family"] == "attention"
            if not (REPO_ROOT / "templates" / "cute" / "attention_fwd.cu.in").exists():
                assert row["status"] == "no_candidate" and "attention_fwd.cu.in" in row["message"]
    # Only the families asked for: the plan's GEMMs have no row (PyTorch keeps them downstream).
    assert not any(row["pattern"].startswith("gemm") for row in rows)
