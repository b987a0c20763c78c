"""`fact optimize --tune-report` on a CPU machine: a winner whose op library cannot be built here (no CUDA
torch: the failed-build case) and a pattern whose kernels all failed verification both keep PyTorch's ops
with a report line, and the composed module is correct (checked by the end-to-end check and here)."""
import json

import pytest
import torch
from composed_module import REPO_ROOT, assert_model_new_equals_model, fact, load_model_new, needs_fact_binary

FIXTURE = REPO_ROOT / "tests" / "python" / "data" / "compose" / "tiny_mlp.py"

pytestmark = [needs_fact_binary,
              pytest.mark.skipif(torch.cuda.is_available(), reason="the op library builds on a CUDA machine: "
                                 "the failed-build case is the CPU machine's")]


@pytest.fixture(scope="module")
def optimized(tmp_path_factory):
    work = tmp_path_factory.mktemp("gating")
    r = fact("discover", FIXTURE, "--json", work / "plan.json")
    assert r.returncode == 0, r.stderr
    rows = []
    for p in json.loads((work / "plan.json").read_text())["patterns"]:
        row = {"pattern": p["rule"], "anchor": p["anchor"], "numerics": "3xtf32", "status": "tuned",
               "baseline": "torch", "fact_ms": 0.5, "baseline_ms": 1.0, "rel_err": 1e-7}
        if p["rule"] == "gemm_bias_gelu_tanh":  # won tuning, but its library cannot be built here
            row.update(winner="cfgA", config={"epilogue": "bias_gelu_tanh"}, problem={"epilogue": "bias_gelu_tanh"})
        else:  # every candidate failed verification
            row.update(status="baseline_kept", winner="torch", config=None, fact_ms=None,
                       message="no candidate verified: PyTorch's op is kept")
        rows.append(row)
    tune = work / "tune.json"
    tune.write_text(json.dumps({"format": "fact-tune-report", "version": 1, "arch": "sm90", "numerics": "3xtf32",
                                "rows": rows}))
    out = work / "opt"
    r = fact("optimize", FIXTURE, "--out", out, "--tune-report", tune)
    assert r.returncode == 0, r.stderr
    return out, r


def test_failed_build_and_failed_verification_keep_pytorch_with_report_lines(optimized):
    out, r = optimized
    report = json.loads((out / "report.json").read_text())
    why = {p["rule"]: p for p in report["patterns"]}
    assert not why["gemm_bias_gelu_tanh"]["accepted"]
    assert "ops_build_failed" in why["gemm_bias_gelu_tanh"]["why"]
    assert why["gemm_bias_gelu_tanh"]["fact_ms"] == 0.5 and why["gemm_bias_gelu_tanh"]["pytorch_ms"] == 1.0
    assert not why["gemm_bias_residual"]["accepted"]
    assert "no candidate verified" in why["gemm_bias_residual"]["why"]
    assert [s["ok"] for s in report["steps"] if s["step"].startswith("ops build")] == [False]
    e2e = report["e2e"]
    assert e2e["correct"] is True and e2e["numerics"] == "3xtf32"
    assert e2e["eager_ms"] is None and e2e["compile_default_ms"] is None  # nothing is timed on a CPU
    # Tracing, the CUDA check, the end-to-end check and the chart share one Python (the worker).
    assert report["process"]["python_starts"] == 1, report["process"]
    md = (out / "report.md").read_text()
    assert "ops_build_failed" in md and "no candidate verified" in md and "## End to end" in md


def test_composed_module_equals_original(optimized):
    out, _ = optimized
    source = (out / "composed" / "model_new.py").read_text()
    assert "= torch.ops.fact." not in source
    assert_model_new_equals_model(load_model_new(out / "composed", "gated_tiny"), rtol=0, atol=0)
