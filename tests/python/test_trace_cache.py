"""fact.trace_cache: a problem file traced before comes back from the cache without importing torch; any change to
what the trace reads (the file, a sibling in its folder, the tracer's options) traces again; off means off."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

MODEL = """
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * {scale}

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
"""

# Runs fact.trace_cache in a fresh Python and says whether torch was imported there.
PROBE = """
import sys
from fact import trace_cache
code = trace_cache.main(sys.argv[1:])
print("TORCH_IMPORTED" if "torch" in sys.modules else "NO_TORCH")
sys.exit(code)
"""


def run(cache: str, model: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python"), FACT_TRACE_CACHE=cache)
    return subprocess.run([sys.executable, "-c", PROBE, str(model), "-o", str(out), *extra], capture_output=True,
                          text=True, env=env, cwd=REPO_ROOT, timeout=300)


def test_a_traced_file_comes_back_from_the_cache_without_torch(tmp_path):
    cache = tmp_path / "cache"
    model = tmp_path / "m" / "model.py"
    model.parent.mkdir()
    model.write_text(MODEL.format(scale=2.0))
    first = run(str(cache), model, tmp_path / "a.json")
    assert first.returncode == 0, first.stderr
    assert "TORCH_IMPORTED" in first.stdout
    assert len(list(cache.glob("*.json"))) == 1
    second = run(str(cache), model, tmp_path / "b.json")
    assert second.returncode == 0, second.stderr
    assert "NO_TORCH" in second.stdout and "from the trace cache" in second.stderr
    assert json.loads((tmp_path / "b.json").read_text()) == json.loads((tmp_path / "a.json").read_text())

    # A sibling the model could import, the model itself, or a tracer option: each is another trace.
    (model.parent / "helper.py").write_text("X = 1\n")
    assert "TORCH_IMPORTED" in run(str(cache), model, tmp_path / "c.json").stdout
    model.write_text(MODEL.format(scale=3.0))
    changed = run(str(cache), model, tmp_path / "d.json")
    assert "TORCH_IMPORTED" in changed.stdout
    assert "3.0" in (tmp_path / "d.json").read_text()
    assert "TORCH_IMPORTED" in run(str(cache), model, tmp_path / "e.json", "--device", "cpu").stdout
    assert len(list(cache.glob("*.json"))) == 4


def test_off_traces_every_time_and_a_failed_trace_is_not_kept(tmp_path):
    model = tmp_path / "model.py"
    model.write_text(MODEL.format(scale=2.0))
    assert "TORCH_IMPORTED" in run("off", model, tmp_path / "a.json").stdout
    assert "TORCH_IMPORTED" in run("off", model, tmp_path / "b.json").stdout
    cache = tmp_path / "cache"
    bad = tmp_path / "bad.py"
    bad.write_text("class NotAModel: pass\n")
    r = run(str(cache), bad, tmp_path / "c.json")
    assert r.returncode == 2 and "fact-trace: error:" in r.stderr
    assert not list(cache.glob("*.json")) and not (tmp_path / "c.json").exists()
