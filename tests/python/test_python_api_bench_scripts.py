"""bench/scripts/python_api_report.py turns the device's python_api.json runs into bench/results/python_api_h100:
checked on made-up runs (a later run's model replaces the earlier row; a wrong variant is marked)."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(model, optimize_ms, correct=True):
    ms = {"eager": 2.0, "cli_composed": 1.0, "optimize": optimize_ms, "backend_fact": 0.9, "compile_default": 1.2}
    checks = {k: {"correct": correct if k == "optimize" else True, "max_abs_diff": 0.0, "rel_err": 1e-7} for k in ms}
    return {"format": "fact-python-api-bench", "version": 1, "date": "2026-11-26", "device": "test GPU",
            "torch": "2.11", "float32_matmul_precision": "high", "top": 1,
            "models": [{"model": model, "numerics": "tf32", "optimize_cold_s": 100.0, "optimize_reuse_s": 2.0,
                        "optimize_warm_db_s": 20.0, "ms": ms, "checks": checks, "fact_ops": ["gemm_x"],
                        "cli": {"seconds": 25.0, "fact_ops": ["gemm_x"]}, "optimize_vs_cli": 1.0 / optimize_ms,
                        "backend_vs_cli": 1.0 / 0.9, "backend_vs_compile": 1.2 / 0.9,
                        "backend_graphs": [{"used": "fact", "why": "FACT + Inductor 0.9 ms vs Inductor alone 1.2 ms"}]}]}


def test_report_merges_runs_and_marks_wrong_results(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(_run("m/minigpt.py", 1.5, correct=False)))
    (tmp_path / "b.json").write_text(json.dumps(_run("m/minigpt.py", 1.01)))
    (tmp_path / "c.json").write_text(json.dumps(_run("m/gpt2.py", 1.0, correct=False)))
    out = tmp_path / "api"
    r = subprocess.run([sys.executable, str(ROOT / "bench/scripts/python_api_report.py"), str(tmp_path / "a.json"),
                        str(tmp_path / "b.json"), str(tmp_path / "c.json"), "--commit", "abc", "-o", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.with_suffix(".json").read_text())
    assert [m["model"] for m in doc["models"]] == ["m/minigpt.py", "m/gpt2.py"]
    assert doc["models"][0]["ms"]["optimize"] == 1.01, "the later run replaces the earlier row"
    md = out.with_suffix(".md").read_text()
    assert "| minigpt | 100 | 2 | 20 |" in md and "0.990x" in md and "1.33x" in md
    assert md.count("WRONG") == 1 and "1 WRONG (err 1.0e-07)" in md
    assert "backend graphs: fact (FACT + Inductor 0.9 ms vs Inductor alone 1.2 ms)" in md
