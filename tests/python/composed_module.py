"""What the tests driving the `fact` CLI share: the binary, and checking a composed folder's ModelNew against its
Model, in this process or in a copy of the folder run by a fresh Python without the fact package."""
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
FACT_BIN = Path(os.environ.get("FACT_BIN") or REPO_ROOT / "build" / "fact")

needs_fact_binary = pytest.mark.skipif(not (FACT_BIN.is_file() and os.access(FACT_BIN, os.X_OK)),
                                       reason=f"fact binary not found at {FACT_BIN} (build it, or set FACT_BIN)")

# The start of a script that must run without FACT: the venv has this checkout's package installed
# (scripts/bootstrap), so an import hook hides it, as on a machine without; importing it fails.
WITHOUT_FACT = """
import sys
class NoFact:
    def find_spec(self, name, path=None, target=None):
        if name == "fact" or name.startswith("fact."):
            raise ModuleNotFoundError(f"no module named {name!r} (hidden: this must run without FACT)")
sys.meta_path.insert(0, NoFact())
try:
    import fact
    raise AssertionError("the fact package is on the path")
except ModuleNotFoundError:
    pass
"""

# Run inside a copied folder without FACT; prints the largest difference over all outputs.
COPIED_CHECK = WITHOUT_FACT + """
import importlib.util, torch
import model_new as m
torch.manual_seed(0)
original = m.Model(*m.get_init_inputs())
new = m.ModelNew(*m.get_init_inputs())
new.load_state_dict(original.state_dict(), strict=True)
x = m.get_inputs()
want, got = original(*x), new(*x)
want, got = (want if isinstance(want, tuple) else (want,)), (got if isinstance(got, tuple) else (got,))
assert len(want) == len(got), (len(want), len(got))
print("MAXDIFF", max(float((a - b).abs().max()) for a, b in zip(got, want)))
"""


def fact(*args, env=None, timeout=900):
    return subprocess.run([str(FACT_BIN), *map(str, args)], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=timeout, env=env)


def load_model_new(folder, name=None):
    """Imports FOLDER/model_new.py under a module name unique to the folder."""
    folder = Path(folder)
    spec = importlib.util.spec_from_file_location(name or f"composed_{folder.parent.name}_{folder.name}",
                                                  folder / "model_new.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def outputs(value):
    return value if isinstance(value, tuple) else (value,)


def assert_model_new_equals_model(module, rounds=3, **tolerance):
    """ModelNew, given Model's weights, returns Model's outputs on ROUNDS fresh inputs."""
    torch.manual_seed(0)
    original = module.Model(*module.get_init_inputs())
    new = module.ModelNew(*module.get_init_inputs())
    new.load_state_dict(original.state_dict(), strict=True)
    with torch.no_grad():
        for _ in range(rounds):
            x = module.get_inputs()
            got, want = outputs(new(*x)), outputs(original(*x))
            assert len(got) == len(want)
            for a, b in zip(got, want):
                torch.testing.assert_close(a, b, **tolerance)


def run_copied(folder, tmp_path, script=COPIED_CHECK, **env_extra):
    """Copies the composed FOLDER to TMP_PATH/elsewhere and runs SCRIPT (COPIED_CHECK) there with neither PYTHONPATH
    nor FACT_REFERENCE_OPS from this process (ENV_EXTRA added)."""
    dest = Path(tmp_path) / "elsewhere"
    if not dest.exists():
        shutil.copytree(folder, dest)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FACT_REFERENCE_OPS")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", script], cwd=dest, env=env, capture_output=True, text=True,
                          timeout=300)


def max_diff(result):
    """The MAXDIFF a successful run_copied printed."""
    assert result.returncode == 0, result.stderr
    return float(result.stdout.split("MAXDIFF")[1].split()[0])


def gemm_epilogue(kernel, inputs=None):
    """The epilogue name `fact tune` records for a GEMM rule's kernel block (bias_activation + relu -> bias_relu;
    a linear combination with a bound bias -> bias, as gemm_problem_from_match does)."""
    kind = kernel.get("epilogue", "linear_combination")
    if kind == "bias_activation":
        return f"bias_{kernel['activation']}"
    if kind == "linear_combination":
        bias = kernel.get("operands", {}).get("bias")
        return "bias" if bias and (inputs or {}).get(bias) else "none"
    return kind


def family_row(p, tag):
    """A winning row as `fact tune` writes it for a normalization or attention pattern (config fields the
    composer and the reference ops read; the problem's scalars from the match)."""
    kernel, attrs, dims = p["kernel"], p.get("attrs", {}), p["dims"]
    if p["family"] == "normalization":
        # An add-norm whose sum the graph reads again was tuned with a kernel that also writes it.
        config = {"family": "normalization", "kind": kernel["kind"], "store_sum": bool(p.get("extra_outputs"))}
        problem = {"kind": kernel["kind"], "eps": attrs["eps"], "rows": dims["rows"], "cols": dims["cols"]}
        winner = f"norm_{tag}{p['rank']}"
    elif p["family"] == "rope":
        config = {"family": "rope", "kind": "half_split", "head_dim": dims["head_dim"]}
        problem = {"batch": dims["batch"], "heads": dims["heads"], "seq": dims["seq"], "head_dim": dims["head_dim"]}
        winner = f"rope_{tag}{p['rank']}"
    else:
        config = {"family": "attention", "head_dim": dims["head_dim"]}
        scale = attrs.get("scale")
        problem = {"scale": 1.0 / math.sqrt(dims["head_dim"]) if scale is None else scale,
                   "causal": bool(dims["causal"]), "heads": dims["heads"], "heads_kv": dims["heads_kv"]}
        winner = f"attn_{tag}{p['rank']}"
    return {"family": p["family"], "winner": winner, "config": config, "problem": problem}


def compose_grown_gemm(tmp_path, model, entry, winner):
    """Composes MODEL's plan (TMP_PATH/plan.json) with the GEMM pattern ENTRY accepted as op gemm_WINNER, its grown
    epilogue tree as its config (the CPU reference op evaluates it); returns the composed folder."""
    tree = entry["kernel"]["epilogue_tree"]
    row = {"pattern": entry["rule"], "anchor": entry["anchor"], "status": "tuned", "baseline": "torch", "fact_ms": 0.5,
           "baseline_ms": 1.0, "winner": winner, "config": {"epilogue": tree}, "problem": {"epilogue": tree}}
    (tmp_path / "tune.json").write_text(json.dumps({"format": "fact-tune-report", "version": 1, "arch": "sm90",
                                                    "numerics": "3xtf32", "rows": [row]}))
    r = fact("compose", tmp_path / "plan.json", tmp_path / "tune.json", "--model", model, "--out", tmp_path / "c")
    assert r.returncode == 0, r.stderr
    return tmp_path / "c"


def report_accepting(plan_doc, families, tag):
    """Op names carry `tag`: ops registered by one test module live in one process."""
    rows = []
    for p in plan_doc["patterns"]:
        row = {"pattern": p["rule"], "anchor": p["anchor"], "status": "tuned", "baseline": "torch", "fact_ms": 1.05,
               "baseline_ms": 1.01, "config": None, "winner": "torch"}
        if p["family"] in families and p["family"] != "gemm":
            row.update(family_row(p, tag), fact_ms=0.5)
        elif p["family"] in families:
            # A grown match's tree is what `fact tune` records as its problem's epilogue (gemm_problem_from_match).
            e = p["kernel"].get("epilogue_tree") or gemm_epilogue(p["kernel"], p.get("inputs"))
            row.update(winner=f"{tag}{p['rank']}", config={"epilogue": e}, problem={"epilogue": e}, fact_ms=0.5)
        rows.append(row)
    return {"format": "fact-tune-report", "version": 1, "arch": "sm90", "numerics": "3xtf32", "rows": rows}
