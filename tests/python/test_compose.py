"""Tests for `fact compose` (stage 3) through the built binary: a tiny MLP is traced, discovered, given a
fabricated tune report, composed, and the composed ModelNew (with CPU reference ops for torch.ops.fact)
must match the original module; a report of another plan is a clear error that leaves no folder."""
import json
import os
import subprocess
import sys

import pytest
from composed_module import REPO_ROOT, assert_model_new_equals_model, fact, load_model_new, needs_fact_binary

from fact.compose.reference_ops import register_reference_ops

FIXTURE = REPO_ROOT / "tests" / "python" / "data" / "compose" / "tiny_mlp.py"
SWIGLU_FIXTURE = REPO_ROOT / "tests" / "python" / "data" / "compose" / "tiny_swiglu.py"

pytestmark = needs_fact_binary


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    """The tiny MLP traced with python -m fact.trace and planned by `fact discover`."""
    work = tmp_path_factory.mktemp("compose")
    ir = work / "tiny.ir.json"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python"))
    r = subprocess.run([sys.executable, "-m", "fact.trace", str(FIXTURE), "-o", str(ir)], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    plan_path = work / "tiny.plan.json"
    r = fact("discover", ir, "--json", plan_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(plan_path.read_text())
    rules = [p["match"]["rule"] if "match" in p else p["rule"] for p in doc["patterns"]]
    assert "gemm_bias_gelu_tanh" in rules and "gemm_bias_residual" in rules, rules
    return work, plan_path, doc


def _pattern(p):
    m = p.get("match", p)
    return m["rule"], m["anchor"]


def tune_report(doc, accept):
    """A report in `fact tune --report` form: the patterns in `accept` won with a fabricated config, the rest
    lost to PyTorch by a little."""
    rows = []
    for p in doc["patterns"]:
        rule, anchor = _pattern(p)
        row = {"pattern": rule, "anchor": anchor, "numerics": "3xtf32", "arch": "sm90", "status": "tuned",
               "baseline": "torch", "fact_ms": 1.05, "baseline_ms": 1.01, "config": None, "winner": "torch"}
        if rule in accept:
            epilogue = {"gemm_bias_gelu_tanh": "bias_gelu_tanh", "gemm_bias_residual": "bias_residual"}[rule]
            row.update({"winner": f"test_{rule}", "config": {"epilogue": epilogue}, "fact_ms": 0.5,
                        "problem": {"epilogue": epilogue}})
        rows.append(row)
    return {"format": "fact-tune-report", "version": 1, "arch": "sm90", "numerics": "3xtf32", "rows": rows}


def compose(work, plan_path, report, name, model=FIXTURE):
    report_path = work / f"{name}.report.json"
    report_path.write_text(json.dumps(report))
    out = work / name
    return fact("compose", plan_path, report_path, "--model", model, "--out", out), out


def assert_matches_original(out):
    register_reference_ops(out / "manifest.json")
    assert_model_new_equals_model(load_model_new(out), atol=1e-5, rtol=1e-5)


def test_accepted_gemm_pattern_is_a_fact_call_and_matches(plan):
    work, plan_path, doc = plan
    r, out = compose(work, plan_path, tune_report(doc, {"gemm_bias_gelu_tanh"}), "one_accepted")
    assert r.returncode == 0, r.stderr
    source = (out / "model_new.py").read_text()
    assert "torch.ops.fact.gemm_test_gemm_bias_gelu_tanh(" in source
    assert "PyTorch kept: best FACT kernel 1.05 ms vs torch 1.01 ms" in source
    assert "torch.ops.aten.tanh" not in source  # the pattern's ops are gone
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "fact-composed-module" and manifest["version"] == 1
    assert [a["pattern"] for a in manifest["accepted"]] == ["gemm_bias_gelu_tanh"]
    assert [x["pattern"] for x in manifest["rejected"]] == ["gemm_bias_residual"]
    assert "1.05 ms" in manifest["rejected"][0]["reason"]
    assert_matches_original(out)


def test_both_accepted_matches(plan):
    work, plan_path, doc = plan
    r, out = compose(work, plan_path, tune_report(doc, {"gemm_bias_gelu_tanh", "gemm_bias_residual"}), "both")
    assert r.returncode == 0, r.stderr
    assert "torch.ops.fact.gemm_test_gemm_bias_residual(" in (out / "model_new.py").read_text()
    assert_matches_original(out)


def test_no_accepted_pattern_replays_aten(plan):
    work, plan_path, doc = plan
    r, out = compose(work, plan_path, tune_report(doc, set()), "none_accepted")
    assert r.returncode == 0, r.stderr
    assert "= torch.ops.fact." not in (out / "model_new.py").read_text()  # no FACT op call in forward
    assert json.loads((out / "manifest.json").read_text())["accepted"] == []
    assert_matches_original(out)


def test_report_of_another_plan_is_an_error_and_writes_nothing(plan):
    work, plan_path, doc = plan
    report = tune_report(doc, {"gemm_bias_gelu_tanh"})
    report["rows"].append({"pattern": "gemm_bias_relu", "anchor": "nowhere", "status": "tuned"})
    r, out = compose(work, plan_path, report, "bad_report")
    assert r.returncode != 0
    assert "gemm_bias_relu" in r.stderr and "nowhere" in r.stderr and "does not hold" in r.stderr
    assert not out.exists()
    assert not any(p.name.startswith("bad_report") for p in work.iterdir() if p.is_dir())


def test_swiglu_pattern_runs_the_up_projection_then_one_fact_call(tmp_path):
    """SwiGLU: the composed module computes U with PyTorch's addmm and hands it to the FACT op (epilogue
    bias_silu_mul, the CPU reference multiplies silu(gate) by it); the result matches the original."""
    ir, plan_path = tmp_path / "swiglu.ir.json", tmp_path / "swiglu.plan.json"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python"))
    r = subprocess.run([sys.executable, "-m", "fact.trace", str(SWIGLU_FIXTURE), "-o", str(ir)], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    r = fact("discover", ir, "--json", plan_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(plan_path.read_text())
    rows = []
    for p in doc["patterns"]:
        rule, anchor = _pattern(p)
        row = {"pattern": rule, "anchor": anchor, "status": "tuned", "baseline": "torch", "fact_ms": 1.05,
               "baseline_ms": 1.01, "config": None, "winner": "torch"}
        if rule == "gemm_swiglu":
            row.update({"winner": "test_swiglu", "config": {"epilogue": "bias_silu_mul"}, "fact_ms": 0.5,
                        "problem": {"epilogue": "bias_silu_mul"}})
        rows.append(row)
    assert [r["pattern"] for r in rows].count("gemm_swiglu") == 1, rows
    report = {"format": "fact-tune-report", "version": 1, "arch": "sm90", "numerics": "3xtf32", "rows": rows}
    r, out = compose(tmp_path, plan_path, report, "swiglu", model=SWIGLU_FIXTURE)
    assert r.returncode == 0, r.stderr
    source = (out / "model_new.py").read_text()
    assert "_up = torch.addmm(" in source and "torch.ops.fact.gemm_test_swiglu(" in source, source
    assert "torch.ops.aten.silu" not in source
    manifest = json.loads((out / "manifest.json").read_text())
    assert [a["epilogue"] for a in manifest["accepted"]] == ["bias_silu_mul"]
    register_reference_ops(out / "manifest.json")
    assert_model_new_equals_model(load_model_new(out), atol=1e-5, rtol=1e-5)
