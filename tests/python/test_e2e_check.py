"""python -m fact.compose.e2e_check on a CPU: correctness in each numerics mode (bf16 casts model and inputs),
a torch.compile baseline that fails is reported with its error, and an op the library lacks is listed
(exit 4) before anything runs."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fact.compose import e2e_check

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURE = REPO_ROOT / "tests" / "python" / "data" / "compose" / "tiny_mlp.py"
FACT_BIN = Path(os.environ.get("FACT_BIN", REPO_ROOT / "build" / "fact"))

pytestmark = pytest.mark.skipif(not FACT_BIN.exists(), reason=f"fact binary not built at {FACT_BIN}")


@pytest.fixture(scope="module")
def composed(tmp_path_factory):
    """The tiny MLP composed with gemm_bias_gelu_tanh accepted as op gemm_e2e_gelu (reference ops on CPU)."""
    work = tmp_path_factory.mktemp("e2e")
    run = lambda *a: subprocess.run([str(FACT_BIN), *map(str, a)], capture_output=True, text=True, cwd=REPO_ROOT)
    r = run("discover", FIXTURE, "--json", work / "plan.json")
    assert r.returncode == 0, r.stderr
    rows = []
    for p in json.loads((work / "plan.json").read_text())["patterns"]:
        row = {"pattern": p["rule"], "anchor": p["anchor"], "status": "tuned", "fact_ms": 0.5, "baseline_ms": 1.0,
               "config": None, "winner": "torch"}
        if p["rule"] == "gemm_bias_gelu_tanh":
            row.update(winner="e2e_gelu", config={"epilogue": "bias_gelu_tanh"}, problem={"epilogue": "bias_gelu_tanh"})
        rows.append(row)
    (work / "tune.json").write_text(json.dumps({"format": "fact-tune-report", "version": 1, "rows": rows}))
    r = run("compose", work / "plan.json", work / "tune.json", "--model", FIXTURE, "--out", work / "c")
    assert r.returncode == 0, r.stderr
    return work / "c"


@pytest.mark.parametrize("numerics,dtype", [("fp32", "float32"), ("tf32", "float32"), ("bf16", "bfloat16")])
def test_correct_in_each_numerics(composed, tmp_path, numerics, dtype):
    out = tmp_path / "r.json"
    code = e2e_check.main([str(composed), "--reference", "--numerics", numerics, "--no-compile", "-o", str(out)])
    r = json.loads(out.read_text())
    assert code == 0 and r["correct"] and r["dtype"] == dtype and r["numerics"] == numerics
    assert r["variants"]["compile_default"] == {"status": "skipped", "error": "not run (--no-compile)"}
    assert r["variants"]["compile_reduce_overhead"] == {"status": "skipped", "error": "not run (--no-compile)"}
    assert 0 < r["rel_err_composed"] < (2e-2 if numerics == "bf16" else 1e-5)


def test_fp32_accurate_convolutions_run_pytorchs_with_cudnn_tf32_off(composed, tmp_path, monkeypatch):
    seen = []
    real = e2e_check.load_composed

    def load(folder):  # inside the check, once its numerics are set
        seen.append(torch.backends.cudnn.allow_tf32)
        return real(folder)

    monkeypatch.setattr(e2e_check, "load_composed", load)
    before = torch.backends.cudnn.allow_tf32
    for flag, want in ((["--no-cudnn-tf32"], False), ([], True)):
        out = tmp_path / "r.json"
        code = e2e_check.main([str(composed), "--reference", "--numerics", "fp32", "--no-compile", *flag, "-o", str(out)])
        r = json.loads(out.read_text())
        assert code == 0 and r["correct"] and r["cudnn_allow_tf32"] is want
        assert seen[-1] is want
        assert torch.backends.cudnn.allow_tf32 == before, "restored for the worker's next job"


def test_failing_compile_baseline_is_reported_with_its_error(composed, tmp_path):
    out = tmp_path / "r.json"
    code = e2e_check.main([str(composed), "--reference", "--numerics", "fp32", "--no-max-autotune",
                           "--compile-backend", "no_such_backend", "-o", str(out)])
    r = json.loads(out.read_text())
    assert code == 0 and r["correct"]
    for name in ("compile_default", "compile_reduce_overhead"):  # reduce-overhead: torch.compile's CUDA graphs
        v = r["variants"][name]
        assert v["status"] == "failed" and "no_such_backend" in v["error"], name
    assert r["variants"]["compile_max_autotune"]["error"] == "not run (--no-max-autotune)"
    assert r["compile_reduce_overhead_ms"] is None


def test_op_missing_from_library_is_listed_before_running(composed, tmp_path):
    bogus = tmp_path / "libfact_ops.so"
    bogus.write_bytes(b"not a library")
    out = tmp_path / "r.json"
    # A fresh process: the tests above registered the reference ops in this one.
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python"))
    code = subprocess.run([sys.executable, "-m", "fact.compose.e2e_check", str(composed), "--lib", str(bogus), "-o",
                           str(out)], env=env, capture_output=True, text=True, timeout=300).returncode
    r = json.loads(out.read_text())
    assert code == e2e_check.EXIT_OPS_MISSING
    assert r["status"] == "ops_missing" and r["missing_ops"] == ["gemm_e2e_gelu"] and "OSError" in r["error"]
    assert "trials" not in r


def test_rel_err_of_a_result_shaped_unlike_the_reference_is_none_not_an_error():
    ref = torch.ones(16, 1, dtype=torch.float64)
    assert e2e_check.rel_err(torch.ones(16, 128), ref) is None  # compare() fails such a result; nothing to measure
    assert e2e_check.rel_err(torch.ones(16, 1), ref) == 0.0


def test_float64_rule_passes_a_module_as_close_to_float64_as_the_original():
    # Deep TF32 networks: two runs differ beyond 1e-2 though each is near float64.
    torch.manual_seed(0)
    ref = torch.randn(32, 1000, dtype=torch.float64) * 3
    noise = lambda scale: (ref + torch.randn_like(ref) * scale).float()  # noqa: E731
    original, composed = noise(3e-3), noise(3e-3)
    close, _, exact = e2e_check.compare(composed, original)
    assert not close and exact, "the two differ beyond KernelBench's tolerance somewhere (floating leaves only)"
    err_c, err_o = e2e_check.float64_errors(composed, ref), e2e_check.float64_errors(original, ref)
    assert err_o[0] < 2e-3 and err_o[1] > 0.01
    assert e2e_check.as_accurate(err_c, err_o)
    # A module three times as far from float64, or wrong in one element, is not.
    assert not e2e_check.as_accurate(e2e_check.float64_errors(noise(1e-2), ref), err_o)
    wrong = composed.clone()
    wrong[5, 7] += 1.0
    assert not e2e_check.as_accurate(e2e_check.float64_errors(wrong, ref), err_o)
    assert not e2e_check.as_accurate(None, err_o), "no float64 reference: KernelBench's rule alone"
    assert e2e_check.compare((composed, 3), (original, 3))[2]
    assert not e2e_check.compare((composed, 3), (original, 4))[2]


def test_the_graphed_replay_toggles_one_instance_and_says_why_it_is_not_used_without_a_gpu(composed, monkeypatch):
    monkeypatch.setenv("FACT_REFERENCE_OPS", "1")
    mod = e2e_check.load_composed(composed)
    model = mod.ModelNew(*mod.get_init_inputs()).eval()
    model.fact_cuda_graphs = False
    inputs = mod.get_inputs()
    with torch.no_grad():
        why = e2e_check.graph_mismatch(model, inputs)
        assert not model.fact_cuda_graphs  # the op-by-op replay restored after the graphed call
        assert why == "no graph was captured"  # a CPU call: the plain replay ran, nothing was captured
    assert e2e_check.choose_replay(2.0, 1.0, why)["chosen"] == "op_by_op"
