"""`fact bench` through the built binary on a CPU machine: a small suite is run (every problem not measured,
and said so), resumed without re-running, reported with a chart; bad suites are one clear error each."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
FACT_BIN = Path(os.environ.get("FACT_BIN") or REPO_ROOT / "build" / "fact")
TINY = REPO_ROOT / "tests" / "python" / "data" / "compose" / "tiny_mlp.py"

pytestmark = pytest.mark.skipif(not FACT_BIN.is_file() or not os.access(FACT_BIN, os.X_OK),
                                reason=f"fact binary not found at {FACT_BIN} (build it, or set FACT_BIN)")


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(FACT_BIN), "bench", *map(str, args)], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=900)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only path; this machine has a CUDA GPU")
def test_cpu_suite_runs_resumes_and_reports_not_measured(tmp_path):
    suite, out = tmp_path / "suite", tmp_path / "out"
    (suite / "level1").mkdir(parents=True)
    shutil.copy(TINY, suite / "level1" / "tiny_mlp.py")
    r = bench(suite, "--out", out, "--numerics", "fp32", "--top", "1")
    assert r.returncode == 0, r.stderr
    assert "[1/1] level1/tiny_mlp: not_measured" in r.stderr
    assert "1 problem(s) not measured" in r.stdout
    s = json.loads((out / "suite.json").read_text())
    assert s["format"] == "fact-bench-suite" and s["numerics"] == "fp32" and s["gpus"] == []
    (p,) = s["problems"]
    assert p["status"] == "not_measured" and "no CUDA GPU" in p["reason"]
    assert p["speedup_eager"] is None and p["compile_default_ms"] is None
    all_ = s["levels"][-1]
    assert all_["level"] == "all" and all_["measured"] == 0 and all_["not_measured"] == 1
    assert all_["correct_fraction"] is None and all_["fast_p"]["fast_1.0"]["vs_eager"] is None
    assert "not measured" in (out / "suite.md").read_text()
    assert (out / "suite.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "level1" / "tiny_mlp" / "report.json").exists()

    r2 = bench(suite, "--out", out, "--numerics", "fp32", "--top", "1", "--resume")
    assert r2.returncode == 0, r2.stderr
    assert "already done, skipped" in r2.stderr and "[start]" not in r2.stderr
    r3 = bench(suite, "--out", out, "--numerics", "fp32", "--top", "1", "--report-only")
    assert r3.returncode == 0 and "[start]" not in r3.stderr
    assert json.loads((out / "suite.json").read_text())["problems"][0]["status"] == "not_measured"

    # --report-only reads each finished problem's optimize report again (as if a GPU had measured it here) and
    # keeps the measuring run's header (its workers), not the redrawing machine's.
    report = out / "level1" / "tiny_mlp" / "report.json"
    doc = json.loads(report.read_text())
    doc.pop("needs_gpu", None)
    doc["e2e"] = {"correct": True, "eager_ms": 2.0, "composed_ms": 1.0, "numerics": "fp32"}
    doc["patterns"] = [{"rule": "gemm", "accepted": True, "ops": 3}, {"rule": "softmax", "accepted": False, "ops": 1}]
    report.write_text(json.dumps(doc))
    before = json.loads((out / "suite.json").read_text())
    before["jobs"] = 3
    (out / "suite.json").write_text(json.dumps(before))
    r4 = bench(suite, "--out", out, "--numerics", "fp32", "--top", "1", "--report-only")
    assert r4.returncode == 0, r4.stderr
    (p,) = json.loads((out / "suite.json").read_text())["problems"]
    assert p["status"] == "correct" and p["fact_patterns"] == 1 and p["speedup_eager"] == 2.0
    md = (out / "suite.md").read_text()
    assert p["fact_ops"] == 3 and p["graph_ops"] == doc["graph_ops"] > 3, "ops of the accepted pattern / the graph's"
    assert "3 worker(s)" in md and f"| level1/tiny_mlp | correct | 1 (3/{doc['graph_ops']}) |" in md


def test_the_problem_set_is_found_and_reported_without_running(tmp_path):
    r = bench(REPO_ROOT / "bench" / "problems", "--out", tmp_path, "--report-only")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "suite.json").read_text())
    assert len(s["problems"]) >= 30
    assert {p["status"] for p in s["problems"]} == {"not_run"}
    assert [lv["level"] for lv in s["levels"]] == ["level1", "level2", "level3", "all"]


def test_a_file_that_is_not_a_problem_is_named(tmp_path):
    (tmp_path / "level1").mkdir()
    shutil.copy(TINY, tmp_path / "level1" / "ok.py")
    (tmp_path / "level1" / "helper.py").write_text("def get_inputs():\n    return []\n")
    r = bench(tmp_path, "--out", tmp_path / "out")
    assert r.returncode != 0
    assert "helper.py: not a problem file: no top-level `class Model` or `def get_init_inputs()`" in r.stderr
    assert not (tmp_path / "out").exists()


def test_a_folder_without_levels_is_a_clear_error(tmp_path):
    r = bench(tmp_path, "--out", tmp_path / "out")
    assert r.returncode != 0 and "holds no problem files" in r.stderr and "level1" in r.stderr


def test_chart_refuses_a_file_that_is_not_a_suite(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"format": "fact-plan"}')
    r = subprocess.run([str(Path(os.sys.executable)), "-m", "fact.bench.suite_chart", str(bad), "-o", str(tmp_path / "x.png")],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "python")})
    assert r.returncode == 2 and "not a fact bench suite.json" in r.stderr
