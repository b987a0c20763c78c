"""Grown GEMM epilogues on KernelBench level 2 (read where it lies, never copied): `fact discover` grows each
GEMM match over the pointwise ops after it (src/discover/epilogue_growth.h), and the grown tree, evaluated
here on the CPU by a small torch evaluator of the compact tree form, gives what the original module gives."""
import importlib.util
import json
import os
from pathlib import Path

import pytest
from composed_module import REPO_ROOT, fact, needs_fact_binary

KERNELBENCH = Path(os.environ.get("KERNELBENCH_DIR") or REPO_ROOT.parent / "shared" / "kernelbench")
ACTIVATIONS = json.loads((REPO_ROOT / "data" / "epilogues" / "activations.json").read_text())["activations"]

pytestmark = [needs_fact_binary,
              pytest.mark.skipif(not (KERNELBENCH / "level2").is_dir(),
                                 reason=f"KernelBench not found at {KERNELBENCH} (set KERNELBENCH_DIR to the folder "
                                        "holding level2/)")]

# problem -> the ops (aten overloads) the GEMM match takes over after the GEMM, in graph order.
GROWN = {
    "12_Gemm_Multiply_LeakyReLU": ["aten.mul.Tensor", "aten.leaky_relu.default"],
    "9_Matmul_Subtract_Multiply_ReLU": ["aten.sub.Tensor", "aten.mul.Tensor", "aten.relu.default"],
    "29_Matmul_Mish_Mish": ["aten.mish.default", "aten.mish.default"],
    "33_Gemm_Scale_BatchNorm": ["aten.mul.Tensor", "aten.batch_norm.default"],
    "41_Gemm_BatchNorm_GELU_ReLU": ["aten.batch_norm.default", "aten.gelu.default", "aten.relu.default"],
    "63_Gemm_ReLU_Divide": ["aten.div.Tensor"],  # relu is the rule's (gemm_bias_relu)
    "70_Gemm_Sigmoid_Scaling_ResidualAdd": ["aten.sigmoid.default", "aten.mul.Tensor", "aten.add.Tensor"],
    "76_Gemm_Add_ReLU": ["aten.add.Tensor", "aten.relu.default"],
    "81_Gemm_Swish_Divide_Clamp_Tanh_Clamp": None,  # every op after the GEMM (checked below)
    "95_Matmul_Add_Swish_Tanh_GELU_Hardtanh": None,
    "97_Matmul_BatchNorm_BiasAdd_Divide_Swish": None,
    "40_Matmul_Scaling_ResidualAdd": ["aten.clone.default", "aten.detach.default", "aten.mul.Tensor", "aten.add.Tensor"],
}


def discover(problem, tmp_path):
    r = fact("discover", KERNELBENCH / "level2" / f"{problem}.py", "--json", tmp_path / "plan.json")
    assert r.returncode == 0, r.stderr
    return json.loads((tmp_path / "plan.json").read_text())


def gemm_entry(plan):
    entries = [p for p in plan["patterns"] if p["family"] == "gemm"]
    assert len(entries) == 1, plan["patterns"]
    return entries[0]


@pytest.mark.parametrize("problem", sorted(GROWN))
def test_gemm_grows_over_the_pointwise_chain(problem, tmp_path):
    plan = discover(problem, tmp_path)
    entry = gemm_entry(plan)
    nodes = {n["name"]: n for n in plan["ir"]["nodes"]}
    assert "epilogue_tree" in entry["kernel"], entry
    grown = [nodes[n]["op"] for n in entry["kernel"]["epilogue_grown_over"]]
    if GROWN[problem] is not None:
        assert grown == GROWN[problem]
    # The whole chain after the GEMM is pointwise in these problems: nothing is left to PyTorch.
    assert plan["uncovered_ops"] == {}, plan["uncovered_ops"]
    assert entry["anchor"] == plan["ir"]["outputs"][0]["ref"]


def test_leaky_relu_tree(tmp_path):
    entry = gemm_entry(discover("12_Gemm_Multiply_LeakyReLU", tmp_path))
    assert entry["kernel"]["epilogue_tree"] == [
        "leaky_relu", ["mul", ["add", ["mul", "alpha", "acc"], {"row": "bias"}], 2.0], {"negative_slope": 0.1}]
    assert entry["nodes"] == ["linear", "mul", "leaky_relu"]


def test_stops_at_a_reduction_with_a_note(tmp_path):
    plan = discover("99_Matmul_GELU_Softmax", tmp_path)
    notes = "\n".join(plan["notes"])
    assert "stops at softmax (aten.softmax.int): a reduction (row-wise kernel)" in notes, notes


# --- CPU replay: the grown tree against the original module ------------------------------------------------

BINARY = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "div": lambda x, y: x / y, "max": lambda x, y: __import__("torch").maximum(x, y),
          "min": lambda x, y: __import__("torch").minimum(x, y)}


def evaluate(tree, env):
    """The compact epilogue tree over env's leaves (acc, alpha, bias, vec<i>, residual), with torch."""
    import torch
    if isinstance(tree, (int, float)):
        return torch.tensor(float(tree), dtype=env["acc"].dtype)
    if isinstance(tree, str):
        return env[tree]
    if isinstance(tree, dict):
        (kind, slot), = tree.items()
        v = env[slot]
        return v.reshape(-1) if kind == "row" else v.reshape(-1, 1) if kind == "col" else v.reshape(())
    op, *args = tree
    if op in BINARY:
        return BINARY[op](evaluate(args[0], env), evaluate(args[1], env))
    act = ACTIVATIONS[op]
    params = args[1] if len(args) > 1 else {}
    t = act["torch"]
    fn = getattr(torch.ops.aten, t["aten"]).default
    return fn(evaluate(args[0], env), *[params[p] for p in t.get("args", [])], **t.get("kwargs", {}))


def load_problem(problem):
    spec = importlib.util.spec_from_file_location(f"kb2_{problem}", KERNELBENCH / "level2" / f"{problem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("problem", ["12_Gemm_Multiply_LeakyReLU", "33_Gemm_Scale_BatchNorm",
                                     "41_Gemm_BatchNorm_GELU_ReLU", "81_Gemm_Swish_Divide_Clamp_Tanh_Clamp",
                                     "95_Matmul_Add_Swish_Tanh_GELU_Hardtanh", "70_Gemm_Sigmoid_Scaling_ResidualAdd",
                                     "97_Matmul_BatchNorm_BiasAdd_Divide_Swish", "40_Matmul_Scaling_ResidualAdd"])
def test_grown_tree_replays_the_module(problem, tmp_path):
    torch = pytest.importorskip("torch")
    plan = discover(problem, tmp_path)
    entry = gemm_entry(plan)
    nodes = {n["name"]: n for n in plan["ir"]["nodes"]}
    module = load_problem(problem)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).eval()
    with torch.no_grad():
        for name, buf in model.named_buffers():  # non-trivial BatchNorm statistics
            if buf.is_floating_point():
                buf.copy_(torch.rand_like(buf) + 0.5 if "var" in name else torch.randn_like(buf))
    x = module.get_inputs()[0][:16]  # a few rows: the tree does not depend on M
    state = dict(model.state_dict())

    def tensor(node_name):
        n = nodes[node_name]
        return x if n["kind"] == "input" else state[n["target"]]

    inputs = entry["inputs"]
    a, b = tensor(inputs[entry["kernel"]["operands"]["a"]]), tensor(inputs[entry["kernel"]["operands"]["b"]])
    acc = a @ (b.t() if entry["attrs"].get("b_layout") == "nk" else b)
    env = {"acc": acc, "alpha": torch.tensor(1.0)}
    for slot, var in entry["kernel"]["operands"].items():
        if slot not in ("a", "b") and var in inputs:
            env[slot] = tensor(inputs[var])
    with torch.no_grad():
        want = model(x)
        got = evaluate(entry["kernel"]["epilogue_tree"], env)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)

