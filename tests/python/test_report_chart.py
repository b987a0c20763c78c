"""python -m fact.compose.report_chart: a PNG from a report with timings (variants and patterns, any family),
and one line, no file, for a report without timing (a CPU run)."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def chart(report, tmp_path):
    (tmp_path / "report.json").write_text(json.dumps(report))
    return subprocess.run([sys.executable, "-m", "fact.compose.report_chart", str(tmp_path / "report.json"), "-o",
                           str(tmp_path / "chart.png")], capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(REPO_ROOT / "python"), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"})


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                    reason="matplotlib not installed: pip install -r python/requirements.txt")
def test_timed_report_draws_png(tmp_path):
    report = {"model": "bench/problems/level3/minigpt_block.py", "numerics": "tf32",
              "e2e": {"numerics": "tf32", "eager_ms": 13.2, "composed_ms": 8.6, "compile_default_ms": 6.2,
                      "compile_max_autotune_ms": None, "fallback": {"applied": False}},
              "patterns": [{"rule": "gemm_bias_gelu_tanh", "anchor": "mul_4", "accepted": True, "fact_ms": 1.02,
                            "pytorch_ms": 1.34},
                           {"rule": "rms_norm", "anchor": "mul_9", "accepted": False, "fact_ms": 0.3,
                            "pytorch_ms": 0.2},
                           {"rule": "layer_norm", "anchor": "ln", "accepted": False, "fact_ms": None,
                            "pytorch_ms": None}]}
    r = chart(report, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "3 variants, 2 patterns" in r.stdout
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_without_timing_is_skipped_with_a_line(tmp_path):
    r = chart({"model": "m.py", "e2e": {"eager_ms": None}, "patterns": [{"rule": "gemm", "anchor": "mm"}]}, tmp_path)
    assert r.returncode == 0 and "chart skipped" in r.stdout and "no timing" in r.stdout
    assert not (tmp_path / "chart.png").exists()


def test_unreadable_report_is_a_clear_error(tmp_path):
    r = subprocess.run([sys.executable, "-m", "fact.compose.report_chart", str(tmp_path / "none.json"), "-o",
                        str(tmp_path / "c.png")], capture_output=True, text=True,
                       env={"PYTHONPATH": str(REPO_ROOT / "python"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "none.json" in r.stderr
