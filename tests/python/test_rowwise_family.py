"""The rowwise family end to end on CPU: a registered row-wise pattern (rule.json, kernel.cu, record.json as
`fact agent` writes them) for the swish-absmax demo problem at a small size is matched by `fact discover`,
`fact tune` builds its one candidate (the registered kernel behind a generated ABI shim; measuring needs a
GPU), and `fact compose` with a tune report accepting it calls torch.ops.fact.rowwise_<entry> with the
module's input, which with the CPU reference ops (the fragment replayed in float64) equals the module.
`fact ops build` wraps the registered kernel in the op; a registry kernel changed after tuning is refused."""
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch
from composed_module import REPO_ROOT, assert_model_new_equals_model, fact, load_model_new, needs_fact_binary

from fact.compose.reference_ops import register_reference_ops
from fact.realize.rowwise_case import ProblemError, RowwiseCase, parse_problem

PROBLEM = REPO_ROOT / "bench" / "problems" / "level2" / "swish_absmax_rows.py"
KERNEL = REPO_ROOT / "bench" / "scripts" / "agent_replies" / "simple.cu"
ENTRY = "swish_absmax_rows"
ROWS, COLS = 64, 256

pytestmark = needs_fact_binary


def literal(a):
    """As fragment_rule writes a literal: numbers and plain lists stay, anything else is {"const": a}."""
    if isinstance(a, (int, float, bool)) or (isinstance(a, list) and all(isinstance(e, (int, float, bool)) for e in a)):
        return a
    return {"const": a}


def registry_entry(ir, root: Path):
    """rule.json / record.json / kernel.cu for the module's whole op chain, as the agent registers them
    (src/agent/rowwise_fragment.cpp fragment_rule / fragment_to_json, src/agent/llm_agent.cpp)."""
    ops = [n for n in ir["nodes"] if n["kind"] == "op"]
    inside = {n["name"] for n in ops}
    pattern_nodes = []
    for n in ops:
        args = [(a["ref"] if a["ref"] in inside else "$in0") if isinstance(a, dict) and "ref" in a else literal(a)
                for a in n["args"]]
        pattern_nodes.append({"id": n["name"], "op": n["op"], "args": args})
    out = ops[-1]["name"]
    rule = {"name": ENTRY, "description": "test entry", "family": "rowwise", "dtypes": ["float32"], "archs": ["sm90"],
            "priority": 0, "pattern": {"nodes": pattern_nodes, "output": out},
            "dims": {"cols": f"@{out}.shape[-1]", "rows": f"numel(@{out}) // cols"},
            "constraints": [f"cols == {COLS}", "numel($in0) == rows * cols and $in0.shape[-1] == cols"],
            "kernel": {"family": "rowwise", "kind": "generated", "abi": "FactRowwiseArgs", "registry_entry": ENTRY,
                       "operands": {"in0": "$in0"}}}
    fragment = {"format": "fact-rowwise-fragment", "version": 1,
                "nodes": [{k: n[k] for k in ("name", "op", "args", "kwargs", "outputs")} for n in ops],
                "inputs": [{"name": "x", "shape": [ROWS, COLS], "broadcast": False}], "output": out,
                "rows": ROWS, "cols": COLS, "dtype": "float32"}
    record = {"format": "fact-registry-entry", "version": 1, "name": ENTRY, "family": "rowwise", "arch": "sm90",
              "dtype": "float32", "numerics": "fp32", "fragment": fragment,
              "kernel": {"abi": "FactRowwiseArgs", "abi_version": 4, "id": ENTRY, "entry": f"fact_{ENTRY}_run",
                         "source_file": "kernel.cu", "config": {}},
              "verification": {"passed": True, "note": "test fixture"}}
    d = root / ENTRY
    d.mkdir(parents=True)
    (d / "rule.json").write_text(json.dumps(rule, indent=1))
    (d / "record.json").write_text(json.dumps(record, indent=1))
    shutil.copy(KERNEL, d / "kernel.cu")
    return fragment


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    w = tmp_path_factory.mktemp("rowwise")
    text, n = re.subn(r"^rows, cols = .*$", f"rows, cols = {ROWS}, {COLS}", PROBLEM.read_text(), flags=re.M)
    assert n == 1
    model = w / "swish_absmax_small.py"
    model.write_text(text)
    env = dict(os.environ, FACT_REGISTRY=str(w / "empty"), FACT_KERNEL_CACHE=str(w / "cache"))
    r = fact("discover", model, "--json", w / "plain.json", env=env)
    assert r.returncode == 0, r.stderr
    fragment = registry_entry(json.loads((w / "plain.json").read_text())["ir"], w / "registry")
    env["FACT_REGISTRY"] = str(w / "registry")
    r = fact("discover", model, "--json", w / "plan.json", env=env)
    assert r.returncode == 0, r.stderr
    return {"dir": w, "model": model, "env": env, "fragment": fragment}


def test_discover_matches_the_registered_pattern(work):
    plan = json.loads((work["dir"] / "plan.json").read_text())
    assert [p["rule"] for p in plan["patterns"]] == [ENTRY]
    assert plan["patterns"][0]["family"] == "rowwise" and plan["uncovered_ops"] == {}


@pytest.fixture(scope="module")
def tuned(work):
    nvcc_here = shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists()
    if not nvcc_here:
        pytest.skip("nvcc is not installed: building the registered kernel needs it")
    report = work["dir"] / "tune.json"
    r = fact("tune", work["dir"] / "plan.json", "--top", "1", "--db", work["dir"] / "db.sqlite", "--report", report,
             env=work["env"])
    assert r.returncode == 0, r.stderr
    return json.loads(report.read_text())


def test_tune_builds_the_registered_kernel_as_the_one_candidate(tuned):
    [row] = tuned["rows"]
    assert row["family"] == "rowwise", row
    if torch.cuda.is_available():  # measured: verified against the float64 replay, then timed
        assert row["status"] in ("tuned", "baseline_kept") and row["verified"] == 1, row
    else:
        assert row["status"] == "needs_gpu", row
    assert row["candidates"] == 1 and row["built"] == 1, row
    p = row["problem"]
    assert (p["entry"], p["rows"], p["cols"], p["broadcast"], p["dtype"]) == (ENTRY, ROWS, COLS, [False], "float32")
    assert p["fragment"]["rows"] == ROWS and p["fragment"]["format"] == "fact-rowwise-fragment"


def accepting(tuned):
    """The tune report with the rowwise candidate as the measured winner (what a GPU run writes)."""
    report = json.loads(json.dumps(tuned))
    [row] = report["rows"]
    p = row["problem"]
    config = {k: p[k] for k in ("entry", "kernel_id", "source_hash", "cols", "broadcast", "dtype", "arch", "fragment")}
    row.update(status="tuned", winner=f"rowwise_{ENTRY}", config=config, fact_ms=0.02, baseline_ms=0.09,
               baseline="torch ops of the fragment (7 ops)")
    return report


@pytest.fixture(scope="module")
def composed(work, tuned):
    (work["dir"] / "accept.json").write_text(json.dumps(accepting(tuned)))
    out = work["dir"] / "composed"
    r = fact("compose", work["dir"] / "plan.json", work["dir"] / "accept.json", "--model", work["model"], "--out", out,
             env=work["env"])
    assert r.returncode == 0, r.stderr
    return out


def test_compose_calls_the_rowwise_op_with_the_module_input(composed):
    source = (composed / "model_new.py").read_text()
    calls = re.findall(rf"= torch\.ops\.fact\.rowwise_{ENTRY}\((\w+)\)  # (\w+)", source)
    assert len(calls) == 1, source
    for op in ("sigmoid", "amax", "div", "abs"):
        assert f"torch.ops.aten.{op}." not in source, op
    manifest = json.loads((composed / "manifest.json").read_text())
    [op] = manifest["accepted"]
    assert op["family"] == "rowwise" and op["op"] == f"rowwise_{ENTRY}"


def test_composed_with_reference_ops_equals_the_original(composed):
    register_reference_ops(composed / "manifest.json")
    assert_model_new_equals_model(load_model_new(composed, "composed_rowwise"), atol=1e-6, rtol=1e-5)


def test_op_library_wraps_the_registered_kernel_and_refuses_a_changed_one(work, tuned):
    (work["dir"] / "accept.json").write_text(json.dumps(accepting(tuned)))
    ops = work["dir"] / "ops"
    r = fact("ops", "build", work["dir"] / "accept.json", "--out", ops, env=work["env"])
    assert r.returncode == 0, r.stderr
    assert f'"rowwise_{ENTRY}(Tensor in0) -> Tensor")' in (ops / "ops.cpp").read_text()
    kernel = (ops / "kernels" / f"rowwise_{ENTRY}.cu").read_text()
    # The registered text byte for byte, then the shim refusing other row lengths before the launch.
    assert kernel.startswith(KERNEL.read_text())
    assert f"a->cols != {COLS}" in kernel and f"return rc != FACT_OK ? rc : fact_{ENTRY}_run(a);" in kernel
    reg = work["dir"] / "registry_changed"
    shutil.copytree(work["dir"] / "registry", reg)
    (reg / ENTRY / "kernel.cu").write_text(KERNEL.read_text() + "\n// edited after tuning\n")
    r = fact("ops", "build", work["dir"] / "accept.json", "--out", work["dir"] / "ops_changed",
             env=dict(work["env"], FACT_REGISTRY=str(reg)))
    assert r.returncode != 0 and "holds another kernel than the one tuned" in r.stderr, r.stderr


def test_measure_case_parses_and_rejects_malformed_problems(work):
    f = work["fragment"]
    p = parse_problem({"entry": ENTRY, "rows": 37, "cols": COLS, "dtype": "float32", "numerics": "fp32", "fragment": f})
    case = RowwiseCase(p)
    assert case.tolerance() == 1e-5 and case.verify_variants() == []
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(1))
    ref = case.reference(inp)["out"]
    x = inp.inputs[0].double()
    y = x * torch.sigmoid(x) * 1.702
    torch.testing.assert_close(ref, y / (y.abs().amax(-1, keepdim=True) + 1e-6))
    [(name, fn)] = case.baselines()
    assert "7 ops" in name and fn(inp)["out"].dtype == torch.float32
    assert case.bytes_per_set() == 2 * 37 * COLS * 4
    with pytest.raises(ProblemError, match="fragment: its cols"):
        parse_problem({"entry": ENTRY, "rows": 8, "cols": 128, "dtype": "float32", "numerics": "fp32", "fragment": f})
    with pytest.raises(ProblemError, match="numerics"):
        parse_problem({"entry": ENTRY, "rows": 8, "cols": COLS, "dtype": "float32", "numerics": "x", "fragment": f})
