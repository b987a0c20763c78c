"""A GEMM's epilogue grows through a reshape that keeps its rows (Hugging Face's Conv1D: addmm on the flattened rows,
viewed back to [batch, seq, out]): `fact discover` takes the GELU after the view into the GEMM, and the composed
module with that GEMM accepted (the CPU reference op evaluates the tree) gives the module's values."""
import json

from composed_module import (REPO_ROOT, assert_model_new_equals_model, compose_grown_gemm, fact, load_model_new,
                             needs_fact_binary)

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
    composed = compose_grown_gemm(tmp_path, CONV1D, entry, "grown_view_gelu")
    source = (composed / "model_new.py").read_text()
    assert "torch.ops.fact.gemm_grown_view_gelu(" in source and "torch.ops.aten.tanh" not in source
    register_reference_ops(composed / "manifest.json")
    assert_model_new_equals_model(load_model_new(composed, "composed_conv1d_gelu"), atol=1e-5, rtol=1e-5)
