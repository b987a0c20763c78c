"""A whole-tensor reduction after a generated row-wise region (a loss's mean): `fact discover` ends the region's
kernel in the per-row partials and leaves the mean to PyTorch over them; `fact compose` with that kernel accepted
(CPU reference ops) gives the module's value. Losses that are one ATen op (smooth_l1_loss, kl_div,
triplet_margin_loss) reach the same kernels through their decompositions."""
import json

import pytest
import torch
from composed_module import REPO_ROOT, assert_model_new_equals_model, fact, load_model_new, needs_fact_binary

from fact.compose.reference_ops import register_reference_ops

COMPOSE = REPO_ROOT / "tests" / "python" / "data" / "compose"

pytestmark = needs_fact_binary

# problem, the region's anchor, its nodes, partials (rows) or 0 for a kernel ending in one value per row, and the
# ops PyTorch keeps in the composed module.
CASES = {
    "hinge_loss": ("clamp", ["mul", "rsub", "clamp"], 48, ["mean.default"]),
    "huber_loss": ("where", ["sub", "abs_1", "lt", "pow_1", "mul", "div", "sub_1", "where"], 48, ["mean.default"]),
    "kl_div_loss": ("sub", ["log", "mul", "eq", "log_1", "mul_1", "where", "isnan", "where_1", "sub"], 48,
                    ["sum.default", "div.Tensor"]),
    "triplet_loss": ("clamp_min", ["sub", "add", "linalg_vector_norm", "sub_1", "add_1", "linalg_vector_norm_1",
                                   "add_2", "sub_2", "clamp_min"], 0, ["mean.default"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_loss_is_one_kernel_and_the_composed_module_equals_it(name, tmp_path):
    anchor, nodes, partials, kept = CASES[name]
    problem_file = COMPOSE / f"{name}.py"
    r = fact("discover", problem_file, "--json", tmp_path / "plan.json")
    assert r.returncode == 0, r.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    [p] = plan["patterns"]
    fragment = p["kernel"]["fragment"]
    assert p["rule"] == "rowwise_generated" and p["anchor"] == anchor and p["nodes"] == nodes
    if partials:
        assert "per-row partials" in r.stdout
        assert fragment["output"] == f"{anchor}__row_partials" and p["dims"]["partials"] == partials
    else:
        assert fragment["output"] == anchor and "partials" not in p["dims"]
    config = {"generated": True, "fragment": fragment, "cols": fragment["cols"], "dtype": "float32", "arch": "sm90",
              "broadcast": [bool(i["broadcast"]) for i in fragment["inputs"]], "output_per_row": True,
              "keepdim": False, "trailing_dims": 1,
              "kernel": {"threads": 128, "vec": 4, "warp_per_row": True, "one_pass": True, "cluster": 1}}
    problem = {k: v for k, v in config.items() if k != "kernel"} | {"rows": fragment["rows"], "numerics": "fp32"}
    row = {"pattern": p["rule"], "anchor": p["anchor"], "family": "rowwise", "status": "tuned", "fact_ms": 0.5,
           "baseline_ms": 1.0, "winner": f"rowwise_{name}_test", "config": config, "problem": problem}
    (tmp_path / "tune.json").write_text(json.dumps({"format": "fact-tune-report", "version": 1, "arch": "sm90",
                                                    "numerics": "fp32", "rows": [row]}))
    out = tmp_path / "composed"
    r = fact("compose", tmp_path / "plan.json", tmp_path / "tune.json", "--model", problem_file, "--out", out)
    assert r.returncode == 0, r.stderr
    source = (out / "model_new.py").read_text()
    assert "torch.ops.fact." in source
    for op in kept:
        assert f"torch.ops.aten.{op}(" in source, op
    for node in nodes:
        assert f"{node} = torch.ops.aten." not in source, f"{node} is the kernel's"
    assert not any(f"aten.{op}." in source for op in ("smooth_l1_loss", "kl_div", "triplet_margin_loss")), "decomposed"
    register_reference_ops(out / "manifest.json")
    module = load_model_new(out, f"composed_{name}")
    assert_model_new_equals_model(module, atol=1e-6, rtol=1e-5)
    with torch.no_grad():
        assert module.ModelNew()(*module.get_inputs()).shape == torch.Size([])


def test_pools_are_computed_in_the_kernels_of_the_ops_after_them(tmp_path):
    """Each pool reads a module input through its window (`"window": true`), the ops after it in its kernel; composed
    with those kernels accepted (CPU reference ops: the fragments replayed), the module gives the original's values."""
    problem_file = COMPOSE / "pool_then_ops.py"
    r = fact("discover", problem_file, "--json", tmp_path / "plan.json")
    assert r.returncode == 0, r.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    by_anchor = {p["anchor"]: p for p in plan["patterns"]}
    assert sorted(by_anchor) == ["mish", "softmax"], sorted(by_anchor)
    assert by_anchor["mish"]["nodes"] == ["max_pool2d", "mish"]
    assert by_anchor["softmax"]["nodes"] == ["avg_pool2d", "softmax"]
    rows = []
    for anchor, p in by_anchor.items():
        fragment = p["kernel"]["fragment"]
        [inp] = fragment["inputs"]
        assert inp["window"] and inp["broadcast"] and fragment["full_shape"] != inp["shape"]
        config = {"generated": True, "fragment": fragment, "cols": fragment["cols"], "dtype": "float32", "arch": "sm90",
                  "broadcast": [True], "output_per_row": False, "keepdim": False,
                  "trailing_dims": fragment["trailing_dims"], "kernel": {"threads": 128, "vec": 1, "warp_per_row": False,
                                                                         "one_pass": True, "cluster": 1}}
        problem = {k: v for k, v in config.items() if k != "kernel"} | {"rows": fragment["rows"], "numerics": "fp32"}
        rows.append({"pattern": p["rule"], "anchor": anchor, "family": "rowwise", "status": "tuned", "fact_ms": 0.5,
                     "baseline_ms": 1.0, "winner": f"rowwise_pool_{anchor}_test", "config": config,
                     "problem": problem})
    (tmp_path / "tune.json").write_text(json.dumps({"format": "fact-tune-report", "version": 1, "arch": "sm90",
                                                    "numerics": "fp32", "rows": rows}))
    out = tmp_path / "composed"
    r = fact("compose", tmp_path / "plan.json", tmp_path / "tune.json", "--model", problem_file, "--out", out)
    assert r.returncode == 0, r.stderr
    source = (out / "model_new.py").read_text()
    assert "max_pool2d(" not in source and "avg_pool2d(" not in source, "the pools are the kernels'"
    register_reference_ops(out / "manifest.json")
    module = load_model_new(out, "composed_pool_then_ops")
    assert_model_new_equals_model(module, atol=1e-6, rtol=1e-5)
