"""A GEMM's epilogue grows through a reshape that keeps its rows (Hugging Face's Conv1D: addmm on the flattened rows,
viewed back to [batch, seq, out]): `fact discover` takes the GELU after the view into the GEMM, and the composed
module with that GEMM accepted (the CPU reference op evaluates the tree) gives the module's values."""
import json

from composed_module import REPO_ROOT, assert_model_new_equals_model, fact, load_model_new, needs_fact_binary

from fact.compose.reference_ops import register_reference_ops

pytestmark = needs_fact_binary


CONV1D = REPO_ROOT / "tests" / "python" / "data" / "compose" / "conv1d_gelu.py"


def test_grows_through_the_view_after_addmm_and_composes(tmp_path):
    """Conv1D's addmm, the view back to [batch, seq, out], the tanh GELU: one GEMM with the GELU as its epilogue;
    composed with that GEMM accepted (the CPU reference op evaluates the tree), the module's values."""
    r = fact("discover", CONV1D, "--json", tmp_path / "plan.json")
    assert r.returncode == 0, r.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    [entry] = [p for p in plan["patterns"] if p["family"] == "gemm"]
    assert entry["anchor"] == "mul_3" and "view_1" in entry["kernel"]["epilogue_grown_over"], entry
    tree = entry["kernel"]["epilogue_tree"]
    row = {"pattern": entry["rule"], "anchor": entry["anchor"], "status": "tuned", "baseline": "torch", "fact_ms": 0.5,
           "baseline_ms": 1.0, "winner": "grown_view_gelu", "config": {"epilogue": tree}, "problem": {"epilogue": tree}}
    (tmp_path / "tune.json").write_text(json.dumps({"format": "fact-tune-report", "version": 1, "arch": "sm90",
                                                    "numerics": "3xtf32", "rows": [row]}))
    r = fact("compose", tmp_path / "plan.json", tmp_path / "tune.json", "--model", CONV1D, "--out", tmp_path / "c")
    assert r.returncode == 0, r.stderr
    source = (tmp_path / "c" / "model_new.py").read_text()
    assert "torch.ops.fact.gemm_grown_view_gelu(" in source and "torch.ops.aten.tanh" not in source
    register_reference_ops(tmp_path / "c" / "manifest.json")
    assert_model_new_equals_model(load_model_new(tmp_path / "c", "composed_conv1d_gelu"), atol=1e-5, rtol=1e-5)
