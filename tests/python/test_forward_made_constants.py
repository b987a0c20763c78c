"""A tensor constant forward() makes from a Python number (torch.tensor(self.value), KernelBench level2/31 and /93)
is not module state: the trace keeps its value in the IR (tracing again where a meta trace lost it), the epilogue
grows over the elementwise minimum with it (a one-element vector), and the composed module makes it again, once,
where the inputs are."""
import json

import torch

from composed_module import (REPO_ROOT, assert_model_new_equals_model, compose_grown_gemm, fact, load_model_new,
                             needs_fact_binary)

from fact import trace
from fact.compose.reference_ops import register_reference_ops

pytestmark = needs_fact_binary

MODEL = REPO_ROOT / "tests" / "python" / "data" / "compose" / "forward_made_constant.py"


def constants(ir):
    return [n for n in ir["nodes"] if n["kind"] == "constant"]


def test_the_ir_holds_the_constants_value_and_the_graph_replays(tmp_path):
    trace.trace(MODEL, tmp_path / "ir.json", None)
    ir = json.loads((tmp_path / "ir.json").read_text())
    assert "replay_blocker" not in ir
    [c] = constants(ir)
    assert c["value"] == 0.25 and c["outputs"][0]["shape"] == []
    # Made on the inputs' device (meta in the first trace, value lost): traced again on CPU tensors.
    on_device = tmp_path / "on_device.py"
    on_device.write_text(MODEL.read_text().replace("torch.tensor(self.value)", "torch.tensor(self.value, device=x.device)"))
    trace.trace(on_device, tmp_path / "ir2.json", None)
    ir2 = json.loads((tmp_path / "ir2.json").read_text())
    assert "replay_blocker" not in ir2 and constants(ir2)[0]["value"] == 0.25
    # Too many values to carry: the module stays PyTorch's, and says why.
    big = tmp_path / "big.py"
    big.write_text(MODEL.read_text().replace("torch.tensor(self.value)", "torch.tensor([self.value] * 48)"))
    trace.trace(big, tmp_path / "ir3.json", None)
    ir3 = json.loads((tmp_path / "ir3.json").read_text())
    assert "over 64 elements" not in ir3.get("replay_blocker", "") and constants(ir3)[0]["value"] == [0.25] * 48
    big.write_text(MODEL.read_text().replace("torch.tensor(self.value)", "torch.tensor([self.value] * 65)[:48]"))
    trace.trace(big, tmp_path / "ir4.json", None)
    ir4 = json.loads((tmp_path / "ir4.json").read_text())
    assert "over 64 elements" in ir4.get("replay_blocker", ""), ir4.get("replay_blocker")


def test_the_minimum_joins_the_epilogue_and_the_composed_module_makes_the_constant(tmp_path):
    r = fact("discover", MODEL, "--json", tmp_path / "plan.json")
    assert r.returncode == 0, r.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    [entry] = [p for p in plan["patterns"] if p["family"] == "gemm"]
    tree = entry["kernel"]["epilogue_tree"]
    assert "min" in json.dumps(tree) and '{"scalar": "vec0"}' in json.dumps(tree), tree
    composed = compose_grown_gemm(tmp_path, MODEL, entry, "made_constant_min")
    source = (composed / "model_new.py").read_text()
    assert '_constant(self, "c_lifted_tensor_0", 0.25, torch.float32, ' in source, source
    register_reference_ops(composed / "manifest.json")
    module = load_model_new(composed, "composed_forward_made_constant")
    assert_model_new_equals_model(module, atol=1e-5, rtol=1e-5)
    new = module.ModelNew()
    with torch.no_grad():
        new(*module.get_inputs())
        made = dict(new._fact_constants)
        new(*module.get_inputs())
    assert list(made) == [("c_lifted_tensor_0", torch.device("cpu"))] and new._fact_constants == made, "made once"
