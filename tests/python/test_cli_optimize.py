"""`fact optimize` on a machine without a GPU: discovery and an unoptimized composed module, with the
GPU-only steps named in the report, and the composed module equal to the original."""
import json
import os
import sys

import pytest
import torch
from composed_module import REPO_ROOT, assert_model_new_equals_model, fact, load_model_new, needs_fact_binary

FIXTURE = REPO_ROOT / "tests" / "python" / "data" / "compose" / "tiny_mlp.py"

pytestmark = needs_fact_binary


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only path; this machine has a CUDA GPU")
def test_optimize_without_gpu_plans_composes_and_names_gpu_steps(tmp_path):
    out = tmp_path / "opt"
    r = fact("optimize", FIXTURE, "--out", out)
    assert r.returncode == 0, r.stderr
    assert "Needs a GPU" in r.stdout and "skipped" in r.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["gpu"] is False and "tuning" in report["needs_gpu"]
    assert [s["ok"] for s in report["steps"]] == [True, True]
    manifest = json.loads((out / "composed" / "manifest.json").read_text())
    assert json.dumps(manifest).count("needs_gpu") >= 1
    assert_model_new_equals_model(load_model_new(out / "composed", "optimized_tiny"), rtol=0, atol=0)


def test_optimize_missing_model_is_a_clear_error(tmp_path):
    r = fact("optimize", tmp_path / "nope.py", "--out", tmp_path / "o", timeout=60)
    assert r.returncode != 0 and "nope.py" in r.stderr
    assert not (tmp_path / "o").exists()


# What `fact optimize` starts on the CPU path, as report.json must count it.
CPU_PYTHON_STARTS = 1   # the Python worker: tracing, the CUDA check and the chart share it
CPU_FACT_STARTS = 0     # every stage is a call in the `fact optimize` process


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only path; this machine has a CUDA GPU")
def test_optimize_counts_python_starts_compiles_and_step_seconds(tmp_path):
    """report.json's "process" block counts every Python start, checked against a FACT_PYTHON that logs each start."""
    log = tmp_path / "python_starts.log"
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    out = tmp_path / "opt"
    r = fact("optimize", FIXTURE, "--out", out, env={**os.environ, "FACT_PYTHON": str(wrapper)})
    assert r.returncode == 0, r.stderr
    process = json.loads((out / "report.json").read_text())["process"]
    started = log.read_text().splitlines()
    assert process["python_starts"] == len(started) == CPU_PYTHON_STARTS, started
    assert sum(process["python_starts_by_use"].values()) == process["python_starts"]
    assert process["fact_starts"] == CPU_FACT_STARTS
    assert process["compiles"] == {}  # nothing is built without a GPU
    seconds = process["step_seconds"]
    assert {"discover", "compose", "total"} <= set(seconds)
    assert all(v >= 0 for v in seconds.values()) and seconds["total"] >= seconds["discover"]
    assert f"Python started {CPU_PYTHON_STARTS} time(s)" in (out / "report.md").read_text()
