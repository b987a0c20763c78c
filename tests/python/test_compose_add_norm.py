"""A residual add fused into the norm after it (rules add_layer_norm / add_rms_norm), end to end on the CPU:
bench/problems/level2's add_layer_norm.py and add_rms_norm.py (at small, odd sizes; the norm is the sum's only
reader) and a two-step pre-norm model whose sums are read again after their norm. Each is traced, planned, given a
tune report in which the normalization patterns won, and composed: every add-norm is one torch.ops.fact call (with
the residual passed in, the add gone), which returns (normed, sum) exactly when the graph reads the sum again, and
the composed module, with the CPU reference ops, equals the original, in process and copied elsewhere without the
fact package (FACT_REFERENCE_OPS=1)."""
import json
import re

import pytest
from composed_module import (REPO_ROOT, assert_model_new_equals_model, fact, load_model_new, max_diff,
                             needs_fact_binary, run_copied)

from fact.compose.reference_ops import register_reference_ops

pytestmark = needs_fact_binary

# name -> (model file, size line to rewrite or None, expected add-norm rules with the sums they export)
CASES = {
    "add_layer_norm": (REPO_ROOT / "bench/problems/level2/add_layer_norm.py", "BATCH, SEQ, HIDDEN = 3, 7, 40",
                       {("add_layer_norm", False)}),
    "add_rms_norm": (REPO_ROOT / "bench/problems/level2/add_rms_norm.py", "BATCH, SEQ, HIDDEN = 3, 7, 40",
                     {("add_rms_norm", False)}),
    "prenorm_residual": (REPO_ROOT / "tests/python/data/compose/prenorm_residual.py", None,
                         {("add_layer_norm", True), ("add_rms_norm", True)}),
}


def model_file(name, folder):
    path, size_line, _ = CASES[name]
    if size_line is None:
        return path
    names = size_line.split(" = ")[0]
    text, n = re.subn(rf"^{re.escape(names)} = .*$", size_line, path.read_text(), flags=re.M)
    assert n == 1, f"{path} has no line '{names} = ...'; update CASES in this test"
    small = folder / f"{name}_small.py"
    small.write_text(text)
    return small


def report_accepting_norms(plan_doc, tag):
    """The tune report `fact tune` would write if every normalization kernel won (GEMMs stay PyTorch's); an
    add-norm whose sum the graph reads again was tuned with a kernel that writes it (store_sum)."""
    rows = []
    for p in plan_doc["patterns"]:
        row = {"pattern": p["rule"], "anchor": p["anchor"], "status": "tuned", "baseline": "torch", "fact_ms": 1.05,
               "baseline_ms": 1.01, "config": None, "winner": "torch"}
        if p["family"] == "normalization":
            kind = p["kernel"]["kind"]
            config = {"family": "normalization", "kind": kind, "store_sum": bool(p["extra_outputs"])}
            row.update(winner=f"norm_{tag}{p['rank']}", config=config, fact_ms=0.5,
                       problem={"kind": kind, "eps": p["attrs"]["eps"], "rows": p["dims"]["rows"],
                                "cols": p["dims"]["cols"]})
        rows.append(row)
    return {"format": "fact-tune-report", "version": 1, "arch": "sm90", "numerics": "3xtf32", "rows": rows}


@pytest.fixture(scope="module", params=sorted(CASES))
def composed(request, tmp_path_factory):
    name = request.param
    work = tmp_path_factory.mktemp(name)
    model = model_file(name, work)
    r = fact("discover", model, "--json", work / "plan.json")
    assert r.returncode == 0, r.stderr
    doc = json.loads((work / "plan.json").read_text())
    # Op names differ per case: the reference ops of every case register in this one process.
    tag = "an" + "".join(word[0] for word in name.split("_"))
    (work / "tune.json").write_text(json.dumps(report_accepting_norms(doc, tag)))
    r = fact("compose", work / "plan.json", work / "tune.json", "--model", model, "--out", work / "composed")
    assert r.returncode == 0, r.stderr
    return name, work, doc


def test_every_residual_add_before_a_norm_is_one_add_norm(composed):
    name, _, doc = composed
    found = {(p["rule"], bool(p["extra_outputs"])) for p in doc["patterns"] if p["rule"].startswith("add_")}
    assert found == CASES[name][2], doc["patterns"]
    assert not any(p["rule"] in ("layer_norm", "rms_norm") for p in doc["patterns"])  # the fused rule won
    op_of = {n["name"]: n.get("op") for n in doc["ir"]["nodes"]}
    for p in doc["patterns"]:
        if p["rule"].startswith("add_"):
            assert op_of[p["nodes"][0]] == "aten.add.Tensor"  # the residual add comes first, in graph order
            assert set(p["inputs"]) >= {"$x", "$residual", "$weight"}
            if p["extra_outputs"]:
                assert p["extra_outputs"] == {"sum": p["nodes"][0]}  # the add itself


def test_add_norm_calls_take_the_residual_and_return_the_sum_only_when_read_again(composed):
    name, work, doc = composed
    source = (work / "composed" / "model_new.py").read_text()
    manifest = json.loads((work / "composed" / "manifest.json").read_text())
    assert manifest["rejected"] == [] or all(r["pattern"].startswith("gemm") for r in manifest["rejected"])
    calls = re.findall(r"^ +(v\d+(?:, v\d+_sum)?) = torch\.ops\.fact\.(norm_\w+)\(([^)]*)\)  # (.*)$", source, re.M)
    adds = [p for p in doc["patterns"] if p["rule"].startswith("add_")]
    assert len(calls) == len(adds), source
    for p in adds:
        targets, _, args, comment = next(c for c in calls if c[3].split(", ")[0] == p["anchor"])
        x, residual = args.split(", ")[:2]
        assert residual != "None", args
        if p["extra_outputs"]:
            assert targets.endswith("_sum") and comment == f"{p['anchor']}, {p['extra_outputs']['sum']}"
            # The sum is read again after the call, from the op's second result.
            assert targets.split(", ")[1] in source.split(targets + " = ")[1], source
        else:
            assert "," not in targets and comment == p["anchor"]
    # Every add is gone from forward: the residual adds (prenorm_residual's g = h + relu(...) too, the second
    # add-norm's sum) and the written-out RMSNorm's eps add are inside the add-norm calls.
    assert "torch.ops.aten.add.Tensor(" not in source, source


def test_composed_with_reference_ops_equals_the_original(composed):
    _, work, _ = composed
    register_reference_ops(work / "composed" / "manifest.json")
    assert_model_new_equals_model(load_model_new(work / "composed"), atol=1e-5, rtol=1e-5)


def test_copied_folder_runs_without_fact_on_reference_ops(composed, tmp_path):
    _, work, _ = composed
    assert max_diff(run_copied(work / "composed", tmp_path, FACT_REFERENCE_OPS="1")) < 1e-5
