"""Open world: FACT takes any PyTorch model in and never stops on it. Models with ops no table of FACT's knows, a
MiniGPT block whose MLP is a lambda over submodules, Hugging Face GPT-2 and Llama configs and torchvision's ResNet-18
are traced, planned, given a tune report in which every pattern won (CPU reference ops stand in for the kernels),
composed, and must equal the original: results of any structure (dicts, ModelOutputs), integer inputs, in-place ops.
A module torch.export cannot trace, or whose results PyTorch cannot serialize, is left to PyTorch whole, with one
line saying why, and `fact optimize` still writes its report and a composed module that runs the original forward.
"""
import json
import os
import subprocess
import sys

import pytest
import torch
from composed_module import REPO_ROOT, fact, load_model_new, needs_fact_binary, report_accepting
from conftest import hf_llama_file

from fact.compose.reference_ops import register_reference_ops

DATA = REPO_ROOT / "tests" / "python" / "data" / "open_world"
FAMILIES = {"gemm", "normalization", "attention", "rope"}

pytestmark = needs_fact_binary


def leaves(value):
    return torch.utils._pytree.tree_flatten(value)[0]


def discover(model, work):
    r = fact("discover", model, "--json", work / "plan.json")
    assert r.returncode == 0, r.stderr
    return r, json.loads((work / "plan.json").read_text())


def compose_all_winning(model, work, tag):
    """discover, a report in which every pattern won, compose: the composed folder and the plan."""
    _, plan = discover(model, work)
    (work / "tune.json").write_text(json.dumps(report_accepting(plan, FAMILIES, tag)))
    r = fact("compose", work / "plan.json", work / "tune.json", "--model", model, "--out", work / "composed")
    assert r.returncode == 0, r.stderr
    return work / "composed", plan


def assert_equal_to_original(folder, rounds=2, tol=1e-4):
    register_reference_ops(folder / "manifest.json")
    module = load_model_new(folder)
    torch.manual_seed(0)
    original = module.Model(*module.get_init_inputs()).eval()
    torch.manual_seed(0)
    new = module.ModelNew(*module.get_init_inputs()).eval()
    new.load_state_dict(original.state_dict(), strict=True)
    with torch.no_grad():
        for _ in range(rounds):
            x = module.get_inputs()
            want, got = original(*x), new(*x)
            assert type(got) is type(want)
            assert torch.utils._pytree.tree_structure(got) == torch.utils._pytree.tree_structure(want)
            assert len(leaves(got)) == len(leaves(want))
            for a, b in zip(leaves(got), leaves(want)):
                if isinstance(b, torch.Tensor):  # (a DynamicCache is one leaf to pytree: compared by type)
                    torch.testing.assert_close(a, b, atol=tol, rtol=tol)
                else:
                    assert type(a) is type(b)
    return module


def accepted(folder):
    return json.loads((folder / "manifest.json").read_text())["accepted"]


def test_ops_no_table_knows_are_left_to_pytorch_and_the_module_still_composes(tmp_path):
    folder, plan = compose_all_winning(DATA / "unknown_ops.py", tmp_path, "ow_unknown")
    assert "aten.diff.default" in plan["left_to_pytorch"] and "aten.cummax.default" in plan["left_to_pytorch"]
    assert [a["pattern"] for a in accepted(folder)] == ["gemm_bias_gelu_tanh"]
    source = (folder / "model_new.py").read_text()
    assert "torch.ops.aten.diff.default(" in source and "torch.ops.aten.add_.Tensor(" in source
    module = assert_equal_to_original(folder)
    # Called otherwise than traced (another batch): the original forward runs, so the result is still right.
    torch.manual_seed(0)
    original, new = module.Model(32).eval(), module.ModelNew(32).eval()
    new.load_state_dict(original.state_dict())
    x, signal = torch.randn(3, 5, 32), torch.randn(1, 8, 9)
    with torch.no_grad():
        for a, b in zip(leaves(new(x, signal)), leaves(original(x, signal))):
            torch.testing.assert_close(a, b)


def test_traced_categories_come_from_pytorch(tmp_path):
    r = subprocess.run([sys.executable, "-m", "fact.trace", str(DATA / "unknown_ops.py"), "-o", str(tmp_path / "ir.json")],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python")),
                       timeout=600)
    assert r.returncode == 0, r.stderr
    ir = json.loads((tmp_path / "ir.json").read_text())
    category = {n["op"]: n["category"] for n in ir["nodes"] if n["kind"] == "op"}
    assert category["aten.gelu.default"] == "elementwise"
    assert category["aten.add_.Tensor"] == "elementwise"
    assert category["aten.slice.Tensor"] == "view"
    assert category["aten.diff.default"] == "other"
    assert ir["call"]["inputs"] == [{"shape": [4, 16, 32]}, {"shape": [2, 8, 20]}]
    assert "replay_blocker" not in ir


def test_lambda_mlp_block_composes_and_passes_the_end_to_end_check(tmp_path):
    folder, plan = compose_all_winning(DATA / "lambda_mlp.py", tmp_path, "ow_lambda")
    assert {a["family"] for a in accepted(folder)} >= {"gemm", "normalization"}
    assert_equal_to_original(folder)
    # The check builds each variant afresh: a deep copy would keep the lambda's submodules of the first instance.
    r = subprocess.run([sys.executable, "-m", "fact.compose.e2e_check", str(folder), "--reference", "--numerics", "fp32",
                        "--trials", "2", "-o", str(tmp_path / "e2e.json")], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python")), timeout=600)
    result = json.loads((tmp_path / "e2e.json").read_text())
    assert r.returncode == 0 and result["correct"], (result, r.stderr[-2000:])
    assert result["rel_err_composed"] < 1e-5


@pytest.mark.parametrize("name", ["hf_gpt2", "hf_llama", "tv_resnet"])
def test_library_models_trace_compose_and_equal_the_original(name, tmp_path):
    folder, plan = compose_all_winning(DATA / f"{name}.py", tmp_path, f"ow_{name}")
    assert "the whole module" not in plan["left_to_pytorch"], plan["left_to_pytorch"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["original_forward"] is None
    if name != "tv_resnet":  # the transformers hold GEMMs (and norms) FACT realizes
        assert manifest["accepted"], manifest["rejected"]
    assert_equal_to_original(folder)


def test_a_bf16_llama_runs_its_norms_between_casts_as_fact_norms(tmp_path):
    """Hugging Face's RMSNorm in bf16 is x.to(float32), the norm, .to(bf16), weight * it: one norm op (the residual
    add before it included), not fp32 row-wise passes with PyTorch's casts and weight multiply around them."""
    folder, plan = compose_all_winning(hf_llama_file(tmp_path, "bfloat16"), tmp_path, "ow_hf_llama_bf16")
    assert plan["numerics"] == "bf16"
    rules = [p["rule"] for p in plan["patterns"]]
    assert rules.count("rms_norm") == 1 and rules.count("add_rms_norm") == 4, rules  # 2 layers' 4 norms + the final
    assert {"gemm_swiglu", "rope", "sdpa_attention"} <= set(rules), rules
    assert "aten._assert_tensor_metadata" not in plan["left_to_pytorch"]
    op_of = {n["name"]: n.get("op") for n in plan["ir"]["nodes"]}
    casts = [n for p in plan["patterns"] if p["family"] == "normalization" for n in p["nodes"] if op_of[n] == "aten.to.dtype"]
    assert len(casts) == 2 * 5  # each norm's cast to fp32 and back
    norms = [a for a in accepted(folder) if a["family"] == "normalization"]
    assert len(norms) == 5
    assert_equal_to_original(folder, tol=2e-2)  # bf16: the kernel multiplies by the weight before rounding once


@pytest.mark.parametrize("name, cause", [("data_dependent", "torch.export cannot trace"),
                                         ("hf_gpt2_cache", "DynamicCache"),
                                         ("namedtuple_result", "a type PyTorch cannot serialize")])
def test_an_untraceable_module_is_left_to_pytorch_whole_and_optimize_still_reports(name, cause, tmp_path):
    model = DATA / f"{name}.py"
    if name == "hf_gpt2_cache":  # GPT-2 as `from_config` gives it: use_cache=True returns a DynamicCache
        model = tmp_path / f"{name}.py"
        model.write_text((DATA / "hf_gpt2.py").read_text().replace("return [False]", "return [True]"))
    r, plan = discover(model, tmp_path)
    assert plan["patterns"] == []
    assert plan["left_to_pytorch"].startswith("the whole module") and cause in plan["left_to_pytorch"]
    assert "Left to PyTorch: the whole module" in r.stdout
    out = tmp_path / "opt"
    r = fact("optimize", model, "--out", out)
    assert r.returncode == 0, r.stderr
    assert (out / "report.json").is_file() and (out / "report.md").is_file()
    source = (out / "composed" / "model_new.py").read_text()
    assert "return super().forward(*args, **kwargs)" in source
    assert_equal_to_original(out / "composed")


def test_a_broken_file_is_a_clear_error_naming_it(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module):\n    def __init__(self):\n        raise ValueError('nope')\n"
                   "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")
    r = fact("optimize", bad, "--out", tmp_path / "opt")
    assert r.returncode != 0
    assert "broken.py" in r.stderr and "ValueError: nope" in r.stderr
    assert "terminate" not in r.stderr


def test_a_forward_that_draws_random_numbers_is_checked_with_the_same_draws(tmp_path):
    """Each variant runs from the same seed, and a float64 reference that cannot run is reported, not fatal."""
    folder, _ = compose_all_winning(DATA / "random_state.py", tmp_path, "ow_random")
    r = subprocess.run([sys.executable, "-m", "fact.compose.e2e_check", str(folder), "--reference", "--numerics", "fp32",
                        "--trials", "2", "-o", str(tmp_path / "e2e.json")], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python")), timeout=600)
    result = json.loads((tmp_path / "e2e.json").read_text())
    assert r.returncode == 0 and result["correct"], (result, r.stderr[-2000:])
    assert "float64 reference failed" in result["reference_error"]
    assert result["rel_err_composed"] is None
