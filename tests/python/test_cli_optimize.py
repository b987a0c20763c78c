"""`fact optimize` on a machine without a GPU: discovery and an unoptimized composed module, with the
GPU-only steps named in the report, and the composed module equal to the original."""
import json

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
