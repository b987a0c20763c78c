"""bench/scripts/fusion_problems.py picks the generic-fusion problems from their graphs, and fusion_report.py turns
the device's suites into bench/results/fusion_h100: checked on made-up op lists and suites; kb_subset.sh copies the
problems a device call carries."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _module(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_selection_reads_the_graph_not_the_name():
    v = _module("fusion_problems").verdict
    assert v("level2", ["aten.linear.default", "aten.mul.Tensor", "aten.softmax.int"]) is None
    assert v("level2", ["aten.matmul.default", "aten.relu.default"]) is None
    assert "conv2d" in v("level2", ["aten.conv2d.default", "aten.linear.default"])
    assert v("level2", ["aten.numpy_T.default", "aten.matmul.default", "aten.div.Tensor"]) is None, "x.T is a view"
    assert v("level2", ["aten.clone.default", "aten.linear.default"]) is None, "a residual's copy"
    assert v("level1", ["aten.relu.default"]) is None
    assert v("level1", ["aten.sub.Tensor", "aten.pow.Tensor_Scalar", "aten.mean.default"]) is None
    assert "max_pool2d" in v("level1", ["aten.max_pool2d.default"])
    assert v("level1", ["aten.flip.default", "aten.cumsum.default", "aten.flip.default"]) is None, "scans are generated"
    assert "matmul" in v("level1", ["aten.matmul.default"])
    assert v("level1", []) == "no op in the traced graph"


def _suite(rows):
    return {"problems": [{"id": i, "level": i.split("/")[0], "status": s, "speedup_eager": e, "speedup_compile": c,
                          "composed_ms": 1.0, "eager_ms": e, "compile_default_ms": c, "fact_ops": 3, "graph_ops": 4,
                          "reason": ""} for i, s, e, c in rows]}


def test_report_summarizes_each_target(tmp_path):
    default = _suite([("level2/12_Gemm_X", "correct", 2.0, 1.0), ("level2/9_Matmul_Y", "correct", 1.0, 0.5),
                      ("level2/99_Matmul_Z", "incorrect", 3.0, 3.0), ("level1/19_ReLU", "correct", 1.1, 0.9)])
    tf32 = _suite([("level2/12_Gemm_X", "correct", 1.0, 1.3)])
    (tmp_path / "d.json").write_text(json.dumps(default))
    (tmp_path / "t.json").write_text(json.dumps(tf32))
    out = tmp_path / "fusion"
    r = subprocess.run([sys.executable, str(ROOT / "bench/scripts/fusion_report.py"), "--default", str(tmp_path / "d.json"),
                        "--tf32", str(tmp_path / "t.json"), "--device", "test GPU", "--commit", "abc", "-o", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.with_suffix(".json").read_text())
    s = doc["summary"]["level2_vs_eager_default"]
    assert (s["measured"], s["correct"], s["count"]) == (3, 2, 2), "the incorrect one is measured, not in the geomean"
    assert abs(s["geomean"] - 2 ** 0.5) < 1e-12
    assert doc["summary"]["level2_vs_compile_tf32"]["geomean"] == 1.3
    assert doc["summary"]["level1_vs_compile_default"]["at_least_1x"] == 0
    assert [p["id"] for p in doc["problems"]][:3] == ["level1/19_ReLU", "level2/9_Matmul_Y", "level2/12_Gemm_X"]
    md = out.with_suffix(".md").read_text()
    assert "| level2/12_Gemm_X | tf32 | correct | 3/4 |" in md


def test_fp32_accurate_convolutions_are_a_mode_of_their_own(tmp_path):
    default = _suite([("level2/1_Conv2D_ReLU", "correct", 2.0, 1.2)])
    accurate = {**_suite([("level2/1_Conv2D_ReLU", "correct", 3.0, 1.5), ("level1/55_conv", "correct", 2.0, 1.9)]),
                "conv_numerics": "3xtf32"}
    for name, suite in (("d.json", default), ("a.json", accurate)):
        (tmp_path / name).write_text(json.dumps(suite))
    out = tmp_path / "conv"
    script = [sys.executable, str(ROOT / "bench/scripts/fusion_report.py"), "--benchmark", "conv", "--device", "test GPU",
              "--commit", "abc", "-o", str(out)]
    r = subprocess.run([*script, "--default", str(tmp_path / "d.json"), "--fp32-accurate", str(tmp_path / "a.json")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.with_suffix(".json").read_text())
    assert doc["summary"]["level2_vs_compile_fp32_accurate"]["geomean"] == 1.5
    assert doc["summary"]["level2_vs_compile_default"]["geomean"] == 1.2
    assert doc["summary"]["level1_vs_eager_fp32_accurate"]["geomean"] == 2.0
    assert "cuDNN's TF32 off" in doc["numerics"]["fp32_accurate"]
    assert "| level2/1_Conv2D_ReLU | fp32_accurate | correct |" in out.with_suffix(".md").read_text()
    # A suite whose convolutions ran TF32 is not an fp32-accurate one, and the other way round.
    for flag, suite in (("--fp32-accurate", "d.json"), ("--default", "a.json")):
        r = subprocess.run([*script, flag, str(tmp_path / suite)], capture_output=True, text=True, cwd=ROOT)
        assert r.returncode != 0 and "its convolutions ran" in r.stderr, r.stderr


def test_report_takes_later_reruns_over_earlier_rows(tmp_path):
    first = _suite([("level2/12_Gemm_X", "correct", 1.5, 1.5), ("level2/9_Matmul_Y", "correct", 1.2, 1.2)])
    rerun = _suite([("level2/12_Gemm_X", "correct", 1.8, 1.8), ("level2/9_Matmul_Y", "not_run", None, None)])
    (tmp_path / "a.json").write_text(json.dumps(first))
    (tmp_path / "b.json").write_text(json.dumps(rerun))
    out = tmp_path / "fusion"
    r = subprocess.run([sys.executable, str(ROOT / "bench/scripts/fusion_report.py"), "--default", str(tmp_path / "a.json"),
                        str(tmp_path / "b.json"), "--device", "test GPU", "--commit", "abc", "-o", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = {p["id"]: p["default"] for p in json.loads(out.with_suffix(".json").read_text())["problems"]}
    assert rows["level2/12_Gemm_X"]["speedup_eager"] == 1.8, "the re-run replaces the earlier row"
    assert rows["level2/9_Matmul_Y"]["status"] == "correct", "a problem the re-run did not run keeps its row"


def test_report_starts_from_a_previous_report(tmp_path):
    first = _suite([("level2/12_Gemm_X", "correct", 1.5, 1.5), ("level1/19_ReLU", "not_run", None, None)])
    (tmp_path / "a.json").write_text(json.dumps(first))
    script = [sys.executable, str(ROOT / "bench/scripts/fusion_report.py"), "--device", "test GPU", "--commit", "abc"]
    r = subprocess.run([*script, "--default", str(tmp_path / "a.json"), "-o", str(tmp_path / "old")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    level1 = _suite([("level1/19_ReLU", "correct", 1.1, 1.0)])
    (tmp_path / "b.json").write_text(json.dumps(level1))
    r = subprocess.run([*script, "--previous", str(tmp_path / "old.json"), "--default", str(tmp_path / "b.json"),
                        "-o", str(tmp_path / "new")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = {p["id"]: p["default"] for p in json.loads((tmp_path / "new.json").read_text())["problems"]}
    assert rows["level1/19_ReLU"]["speedup_eager"] == 1.1, "the new suite replaces the previous report's row"
    assert rows["level2/12_Gemm_X"]["speedup_eager"] == 1.5, "rows the new suite did not run stay"
    r = subprocess.run([*script, "-o", str(tmp_path / "none")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode != 0 and "at least one suite" in r.stderr
    # --only-listed keeps the benchmark's own problems (bench/fusion_problems.json lists level1/19_ReLU, not 12_Gemm_X).
    r = subprocess.run([*script, "--only-listed", "--default", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                        "-o", str(tmp_path / "listed")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert [p["id"] for p in json.loads((tmp_path / "listed.json").read_text())["problems"]] == ["level1/19_ReLU"]


def test_a_remeasured_problem_drops_its_earlier_kernel_rows(tmp_path):
    """Per-pattern rows come from the run that measured the row: a re-measured problem whose report.json did not come
    back has none, rather than an earlier kernel's times beside the new end-to-end row."""
    script = [sys.executable, str(ROOT / "bench/scripts/fusion_report.py"), "--device", "test GPU", "--commit", "abc"]
    (tmp_path / "a.json").write_text(json.dumps(_suite([("level2/12_Gemm_X", "correct", 1.5, 1.5),
                                                        ("level2/9_Matmul_Y", "correct", 1.2, 1.2)])))
    r = subprocess.run([*script, "--default", str(tmp_path / "a.json"), "-o", str(tmp_path / "old")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    old = json.loads((tmp_path / "old.json").read_text())
    for p in old["problems"]:
        p["kernels"] = [{"rule": "gemm", "fact_ms": 1.0, "pytorch_ms": 2.0, "accepted": True}]
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "b.json").write_text(json.dumps(_suite([("level2/12_Gemm_X", "correct", 1.8, 1.8)])))
    r = subprocess.run([*script, "--previous", str(tmp_path / "old.json"), "--default", str(tmp_path / "b.json"),
                        "-o", str(tmp_path / "new")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = {p["id"]: p for p in json.loads((tmp_path / "new.json").read_text())["problems"]}
    assert "kernels" not in rows["level2/12_Gemm_X"], "re-measured without its report.json: no stale kernel rows"
    assert rows["level2/9_Matmul_Y"]["kernels"][0]["fact_ms"] == 1.0, "a problem not re-measured keeps its rows"
    # A tf32 re-run of a problem leaves its default-numerics kernel rows alone.
    (tmp_path / "t.json").write_text(json.dumps(_suite([("level2/9_Matmul_Y", "correct", 1.0, 1.1)])))
    r = subprocess.run([*script, "--previous", str(tmp_path / "new.json"), "--tf32", str(tmp_path / "t.json"),
                        "-o", str(tmp_path / "tf32")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = {p["id"]: p for p in json.loads((tmp_path / "tf32.json").read_text())["problems"]}
    assert rows["level2/9_Matmul_Y"]["kernels"][0]["fact_ms"] == 1.0, "another mode's rows stay"
    assert rows["level2/9_Matmul_Y"]["tf32"]["speedup_compile"] == 1.1


def test_report_takes_whole_models_from_their_optimize_folders(tmp_path):
    folder = tmp_path / "rn"
    folder.mkdir()
    patterns = [{"rule": "conv", "family": "conv", "accepted": False, "fact_ms": 0.27, "pytorch_ms": 0.6,
                 "numerics": "tf32", "why": "PyTorch kept: e2e_fallback"},
                {"rule": "conv", "family": "conv", "accepted": False, "fact_ms": None, "pytorch_ms": None,
                 "numerics": "tf32", "why": "over_budget"}]
    e2e = {"correct": True, "numerics": "3xtf32", "composed_ms": 6.5, "eager_ms": 6.4, "compile_default_ms": 3.7,
           "speedups": {"vs_eager": 0.98, "vs_compile_default": 0.57}, "rel_err_composed": 5e-4,
           "rel_err_original": 5e-4, "fallback": {"applied": True, "reason": "the composed module took 7.6 ms"}}
    (folder / "report.json").write_text(json.dumps({"model": "bench/models/tv_resnet50.py", "graph_ops": 174,
                                                    "patterns": patterns, "e2e": e2e}))
    out = tmp_path / "conv"
    r = subprocess.run([sys.executable, str(ROOT / "bench/scripts/fusion_report.py"), "--benchmark", "conv",
                        "--only-listed", "--models", str(folder), "--device", "test GPU", "--commit", "abc",
                        "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.with_suffix(".json").read_text())
    (row,) = [p for p in doc["problems"] if p["id"] == "models/tv_resnet50"]
    assert row["default"]["speedup_compile"] == 0.57 and row["default"]["fact_ops"] == 0
    assert "took 7.6 ms" in row["default"]["reason"] and "1 of 2 patterns tuned" in row["default"]["reason"]
    assert len(row["kernels"]) == 2 and doc["summary"]["models_vs_compile_default"]["count"] == 1
    assert "| models/tv_resnet50 | default | correct | 0/174 |" in out.with_suffix(".md").read_text()

    # Kept: the accepted patterns' ops are FACT's.
    patterns[0].update(accepted=True, ops=4)
    patterns[1].update(accepted=False, ops=3)
    e2e["fallback"] = {"applied": False}
    (folder / "report.json").write_text(json.dumps({"model": "bench/models/tv_resnet50.py", "graph_ops": 174,
                                                    "patterns": patterns, "e2e": e2e}))
    r = subprocess.run([sys.executable, str(ROOT / "bench/scripts/fusion_report.py"), "--benchmark", "conv",
                        "--only-listed", "--models", str(folder), "--device", "test GPU", "--commit", "abc",
                        "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "| models/tv_resnet50 | default | correct | 4/174 |" in out.with_suffix(".md").read_text()


def test_kb_subset_copies_problems_by_number_and_names_a_missing_one(tmp_path):
    kb = tmp_path / "kb" / "level2"
    kb.mkdir(parents=True)
    for name in ("5_ConvTranspose2d_Subtract_Tanh.py", "52_Conv2d_Activation_BatchNorm.py", "55_Matmul.py"):
        (kb / name).write_text("# stand-in\n")
    script = ROOT / "bench" / "scripts" / "kb_subset.sh"
    env = {**os.environ, "KERNELBENCH": str(tmp_path / "kb")}
    dest = tmp_path / "set"
    r = subprocess.run(["bash", str(script), str(dest), "level2", "5", "52"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (dest / "level2").iterdir()) == ["52_Conv2d_Activation_BatchNorm.py",
                                                                  "5_ConvTranspose2d_Subtract_Tanh.py"]
    bad = subprocess.run(["bash", str(script), str(dest), "level2", "7"], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "no problem 7" in bad.stderr


def test_results_table_keeps_its_note_until_a_new_one_is_given(tmp_path):
    """The per-kernel results files (gemm_h100/h200.json) carry how their runs were made as a note above the table."""
    results_table = _module("results_table")
    row = {"problem": "p", "pattern": "gemm", "numerics": "3xtf32", "baseline_ms": 1.0, "fact_ms": 0.5}
    first = results_table.merge(None, [dict(row)], {"device": "GPU"}, note="(1) how run one was made")
    assert first["note"] == "(1) how run one was made"
    kept = results_table.merge(first, [dict(row, fact_ms=0.4)], {})
    assert kept["note"] == first["note"] and [r["fact_ms"] for r in kept["rows"]] == [0.4]
    replaced = results_table.merge(kept, [], {}, note="(1) ...\n\n(2) run two")
    assert replaced["note"].endswith("(2) run two")
    text = results_table.write(tmp_path / "gemm_h200", replaced)
    assert text.startswith("# GEMM benchmark: GPU") and "(2) run two" in text.split("| problem |")[0]
    assert "note" not in results_table.merge(None, [dict(row)], {})
