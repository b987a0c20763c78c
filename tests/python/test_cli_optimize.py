"""`fact optimize` on a machine without a GPU: discovery and an unoptimized composed module, with the
GPU-only steps named in the report, and the composed module equal to the original."""
import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURE = REPO_ROOT / "tests" / "python" / "data" / "compose" / "tiny_mlp.py"
FACT_BIN = Path(os.environ.get("FACT_BIN", REPO_ROOT / "build" / "fact"))

pytestmark = pytest.mark.skipif(not FACT_BIN.exists(), reason=f"fact binary not built at {FACT_BIN}")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only path; this machine has a CUDA GPU")
def test_optimize_without_gpu_plans_composes_and_names_gpu_steps(tmp_path):
    out = tmp_path / "opt"
    r = subprocess.run([str(FACT_BIN), "optimize", str(FIXTURE), "--out", str(out)], capture_output=True, text=True,
                       cwd=REPO_ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Needs a GPU" in r.stdout and "skipped" in r.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["gpu"] is False and "tuning" in report["needs_gpu"]
    assert [s["ok"] for s in report["steps"]] == [True, True]
    manifest = json.loads((out / "composed" / "manifest.json").read_text())
    assert json.dumps(manifest).count("needs_gpu") >= 1

    spec = importlib.util.spec_from_file_location("optimized_tiny", out / "composed" / "model_new.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    original = mod.Model(*mod.get_init_inputs())
    composed = mod.ModelNew(*mod.get_init_inputs())
    composed.load_state_dict(original.state_dict(), strict=True)
    x = mod.get_inputs()
    torch.testing.assert_close(composed(*x), original(*x), rtol=0, atol=0)


def test_optimize_missing_model_is_a_clear_error(tmp_path):
    r = subprocess.run([str(FACT_BIN), "optimize", str(tmp_path / "nope.py"), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert r.returncode != 0 and "nope.py" in r.stderr
    assert not (tmp_path / "o").exists()
