"""A whole-tensor reduction after a generated row-wise region (a loss's mean): `fact discover` ends the region's
kernel in the per-row partials and leaves the mean to PyTorch over them; `fact compose` with that kernel accepted
(CPU reference ops) gives the module's value."""
import json

import torch
from composed_module import REPO_ROOT, assert_model_new_equals_model, fact, load_model_new, needs_fact_binary

from fact.compose.reference_ops import register_reference_ops

PROBLEM = REPO_ROOT / "tests" / "python" / "data" / "compose" / "hinge_loss.py"

pytestmark = needs_fact_binary


def test_the_mean_reads_the_kernels_partials_and_equals_the_module(tmp_path):
    r = fact("discover", PROBLEM, "--json", tmp_path / "plan.json")
    assert r.returncode == 0, r.stderr
    assert "per-row partials" in r.stdout
    plan = json.loads((tmp_path / "plan.json").read_text())
    [p] = plan["patterns"]
    fragment = p["kernel"]["fragment"]
    assert p["rule"] == "rowwise_generated" and p["anchor"] == "clamp" and fragment["output"] == "clamp__row_partials"
    assert p["dims"]["partials"] == 48
    config = {"generated": True, "fragment": fragment, "cols": fragment["cols"], "dtype": "float32", "arch": "sm90",
              "broadcast": [bool(i["broadcast"]) for i in fragment["inputs"]], "output_per_row": True,
              "keepdim": False, "trailing_dims": 1,
              "kernel": {"threads": 128, "vec": 4, "warp_per_row": True, "one_pass": True, "cluster": 1}}
    problem = {k: v for k, v in config.items() if k != "kernel"} | {"rows": fragment["rows"], "numerics": "fp32"}
    row = {"pattern": p["rule"], "anchor": p["anchor"], "family": "rowwise", "status": "tuned", "fact_ms": 0.5,
           "baseline_ms": 1.0, "winner": "rowwise_partials_test", "config": config, "problem": problem}
    (tmp_path / "tune.json").write_text(json.dumps({"format": "fact-tune-report", "version": 1, "arch": "sm90",
                                                    "numerics": "fp32", "rows": [row]}))
    out = tmp_path / "composed"
    r = fact("compose", tmp_path / "plan.json", tmp_path / "tune.json", "--model", PROBLEM, "--out", out)
    assert r.returncode == 0, r.stderr
    source = (out / "model_new.py").read_text()
    assert "torch.ops.fact." in source and "torch.ops.aten.mean.default(" in source
    assert "torch.ops.aten.clamp" not in source, "the region is the kernel's"
    register_reference_ops(out / "manifest.json")
    module = load_model_new(out, "composed_partials")
    assert_model_new_equals_model(module, atol=1e-6, rtol=1e-5)
    with torch.no_grad():
        assert module.ModelNew()(*module.get_inputs()).shape == torch.Size([])
