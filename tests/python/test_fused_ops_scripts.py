"""The inputs and the report of the device check bench/scripts/fused_ops_h100.sh for the residual add + norm op:
the models of add_norm_models.py trace here and plan exactly one add-norm each, at the block shapes they name,
with the sum exported (so the tuned op writes both outputs); fused_ops_report.py turns a tune report into
fused_h100.json rows that say what was checked, and rewrites the Markdown table when merging."""
import importlib.util
import datetime as dt
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FACT_BIN = Path(os.environ.get("FACT_BIN") or REPO_ROOT / "build" / "fact")
SCRIPTS = REPO_ROOT / "bench" / "scripts"


def script(name):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not FACT_BIN.is_file(), reason=f"fact binary not found at {FACT_BIN} (build it)")
def test_add_norm_models_plan_one_add_norm_each_with_the_sum_exported(tmp_path):
    models = script("add_norm_models")
    r = subprocess.run([sys.executable, str(SCRIPTS / "add_norm_models.py"), str(tmp_path)], capture_output=True,
                       text=True, check=True)
    files = [Path(line) for line in r.stdout.split()]
    assert sorted(f.stem for f in files) == sorted(models.SHAPES)

    def plan(f):
        out = tmp_path / f"{f.stem}.plan.json"
        res = subprocess.run([str(FACT_BIN), "discover", str(f), "--numerics", "bf16", "--json", str(out)],
                             capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
        assert res.returncode == 0, res.stderr
        return f.stem, json.loads(out.read_text())

    with ThreadPoolExecutor(max_workers=2) as pool:
        plans = dict(pool.map(plan, files))
    for name, doc in plans.items():
        kind, batch, seq, hidden, eps = models.SHAPES[name]
        (p,) = doc["patterns"]
        assert p["rule"] == f"add_{kind}", name
        assert p["dims"] == {"rows": batch * seq, "cols": hidden}, name
        assert p["extra_outputs"] == {"sum": p["nodes"][0]}, name
        assert abs(p["attrs"]["eps"] - eps) < 1e-12, name
    assert models.SHAPES["minigpt_add_layer_norm"][1:4] == (128, 512, 768)
    assert models.SHAPES["llama3_add_rms_norm"][1:4] == (2, 2048, 4096)
    assert all(b * s % 2 and h % 2 for n, (_, b, s, h, _) in models.SHAPES.items() if n.startswith("odd_"))


def test_report_rows_say_what_was_checked_and_merge_rewrites_the_table(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    problem = {"kind": "rms_norm", "rows": 4096, "cols": 4096, "store_sum": True, "has_residual": True,
               "numerics": "bf16", "dtype": "bfloat16"}
    rows = [{"pattern": "add_rms_norm", "anchor": "mul_1", "family": "normalization", "status": "baseline_kept",
             "fact_ms": 0.30, "baseline_ms": 0.305, "baseline": "torch add + F.rms_norm", "config": None,
             "winner": "torch", "problem": problem, "rel_err": 2e-3},
            {"pattern": "add_layer_norm", "anchor": "layer_norm", "family": "normalization", "status": "tuned",
             "fact_ms": 0.1, "baseline_ms": 0.2, "baseline": "torch add + F.layer_norm", "config": {"id": "n"},
             "winner": "norm_n", "problem": {**problem, "kind": "layer_norm", "rows": 37, "cols": 771,
                                              "store_sum": False}}]
    (work / "tune-llama3_add_rms_norm-bf16.json").write_text(
        json.dumps({"format": "fact-tune-report", "numerics": "bf16", "rows": rows}))
    results = tmp_path / "fused.json"
    old = {"device": "H100", "date": "d", "commit": "c", "cutlass": "4.2.0",
           "rows": [{"problem": "minigpt_block", "pattern": "gemm_bias_residual", "numerics": "tf32", "kept": "fact",
                     "baseline": "cuBLAS", "baseline_ms": 1.0, "fact_ms": 0.8, "cutlass_vs_baseline": 1.25}]}
    results.write_text(json.dumps(old))
    r = subprocess.run([sys.executable, str(SCRIPTS / "fused_ops_report.py"), str(work), "--out",
                        str(tmp_path / "rows.json"), "--merge", str(results)], capture_output=True, text=True,
                       cwd=REPO_ROOT)
    assert r.returncode == 0, r.stderr
    merged = json.loads(results.read_text())["rows"]
    # Sorted by problem; the old row keeps its run's stamp, the new rows get today's.
    assert [x["pattern"] for x in merged] == ["add_rms_norm", "add_layer_norm", "gemm_bias_residual"]
    fused, odd, kept = merged
    assert kept["measured"] == "d commit c"
    assert fused["measured"].startswith(dt.date.today().isoformat() + " commit ")
    assert fused["checked"] == "y and sum vs float64 at 37 and 4096 rows of 4096"
    assert fused["kept"] == "pytorch" and fused["speedup"] == 1.0  # within the 3% margin
    assert odd["checked"] == "y vs float64 at 37 rows of 771" and odd["kept"] == "fact"
    table = results.with_suffix(".md").read_text()
    assert "| minigpt_block | gemm_bias_residual | tf32 |" in table
    assert "| llama3_add_rms_norm | add_rms_norm | bf16 | torch add + F.rms_norm |" in table
    assert "| d commit c |" in table
    assert table.count("\n|") == 2 + len(merged)  # header, separator, one line per row
