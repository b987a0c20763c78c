"""The composed folder is the artifact: copied elsewhere, it imports with PyTorch alone (no `fact` package on
the path), loads its op library from its own folder, and fails with a clear message when the library is
missing or cannot run here (no CUDA GPU); FACT_REFERENCE_OPS=1 runs the shipped PyTorch references."""
import json

import pytest
import torch
from composed_module import (COPIED_CHECK, REPO_ROOT, WITHOUT_FACT, fact, max_diff, needs_fact_binary,
                             run_copied)

FIXTURE = REPO_ROOT / "tests" / "python" / "data" / "compose" / "tiny_mlp.py"

pytestmark = needs_fact_binary


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    work = tmp_path_factory.mktemp("artifact")
    r = fact("discover", FIXTURE, "--json", work / "plan.json")
    assert r.returncode == 0, r.stderr
    rows = []
    for p in json.loads((work / "plan.json").read_text())["patterns"]:
        row = {"pattern": p["rule"], "anchor": p["anchor"], "status": "tuned", "baseline": "torch",
               "fact_ms": 0.5, "baseline_ms": 1.0, "config": None, "winner": "torch"}
        if p["rule"] == "gemm_bias_gelu_tanh":
            row.update(winner="art_gelu", config={"epilogue": "bias_gelu_tanh"}, problem={"epilogue": "bias_gelu_tanh"})
        rows.append(row)
    (work / "tune.json").write_text(json.dumps({"format": "fact-tune-report", "version": 1, "rows": rows}))
    return work


def composed(work, name, *extra):
    out = work / name
    r = fact("compose", work / "plan.json", work / "tune.json", "--model", FIXTURE, "--out", out, *extra)
    assert r.returncode == 0, r.stderr
    return out


def test_missing_library_is_a_clear_import_error(plan, tmp_path):
    folder = composed(plan, "no_lib")
    assert (folder / "reference_ops.py").is_file() and not (folder / "libfact_ops.so").exists()
    r = run_copied(folder, tmp_path)
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "gemm_art_gelu" in r.stderr
    assert "libfact_ops.so is not in" in r.stderr and "FACT_REFERENCE_OPS=1" in r.stderr


def test_reference_ops_shipped_with_the_folder_run_without_fact(plan, tmp_path):
    assert max_diff(run_copied(composed(plan, "ref"), tmp_path, FACT_REFERENCE_OPS="1")) < 1e-5


# The replay reads each parameter through its submodule's table, found once: a parameter assigned anew afterwards, or
# buffers replaced by .to(), are the ones read on the next call.
STATE_CHECK = COPIED_CHECK + """
assert torch.allclose(new(*x), original(*x), atol=1e-5)
assert len(m._STATE) == 4 and [k for k, _ in m._STATE] == ["parameter"] * 4, m._STATE
new.fc2.weight = torch.nn.Parameter(torch.randn_like(new.fc2.weight))
original.fc2.weight = torch.nn.Parameter(new.fc2.weight.detach().clone())
assert torch.allclose(new(*x), original(*x), atol=1e-5), "the parameter assigned anew is read"
print("STATE ok")
"""


def test_replay_reads_parameters_assigned_after_the_first_call(plan, tmp_path):
    r = run_copied(composed(plan, "state"), tmp_path, script=STATE_CHECK, FACT_REFERENCE_OPS="1")
    assert r.returncode == 0 and "STATE ok" in r.stdout, r.stderr


# FACT_CUDA_GRAPHS=1: from the third call on, the replay is one captured CUDA graph; fresh inputs are copied in, an
# in-place update of a weight captures again, and an autograd call runs the plain replay.
GRAPH_CHECK = WITHOUT_FACT + """
import torch
import model_new as m
torch.manual_seed(0)
original = m.Model(*m.get_init_inputs()).cuda().eval()
new = m.ModelNew(*m.get_init_inputs()).cuda().eval()
new.load_state_dict(original.state_dict(), strict=True)
def check():
    x = [t.cuda() for t in m.get_inputs()]
    with torch.no_grad():
        got, want = new(*x), original(*x)
    assert torch.allclose(got, want, atol=1e-4), float((got - want).abs().max())
for _ in range(5):
    check()
graphed = new._fact_graphed
assert graphed.failed is None and graphed.graph is not None, graphed.failed
first = graphed.graph
with torch.no_grad():
    new.fc2.weight.add_(0.5)
    original.fc2.weight.add_(0.5)
for _ in range(4):
    check()
assert graphed.graph is not None and graphed.graph is not first, "an in-place update of a weight captures again"
x = [t.cuda() for t in m.get_inputs()]
assert torch.allclose(new(*x), original(*x), atol=1e-4), "with autograd on: the plain replay"
print("GRAPHS ok")
"""


# The graphed replay is the module's default where replay.json says so (the end-to-end check writes it where a graph
# measured faster); FACT_CUDA_GRAPHS overrides the file; a call a graph cannot take (here: on the CPU) runs the plain
# replay whatever the default.
DEFAULT_CHECK = COPIED_CHECK + """
print("GRAPHS", m.ModelNew.fact_cuda_graphs, new.fact_cuda_graphs)
"""


def test_replay_json_makes_the_graphed_replay_the_default_and_the_environment_overrides_it(plan, tmp_path):
    folder = composed(plan, "replay_default")
    plain = run_copied(folder, tmp_path / "a", script=DEFAULT_CHECK, FACT_REFERENCE_OPS="1")
    assert plain.returncode == 0 and "GRAPHS False False" in plain.stdout, plain.stderr[-2000:]
    (folder / "replay.json").write_text(json.dumps({"cuda_graphs": True, "chosen": "cuda_graph"}))
    graphed = run_copied(folder, tmp_path / "b", script=DEFAULT_CHECK, FACT_REFERENCE_OPS="1")
    assert graphed.returncode == 0 and "GRAPHS True True" in graphed.stdout, graphed.stderr[-2000:]
    assert max_diff(graphed) < 1e-5  # on the CPU the plain replay runs
    off = run_copied(folder, tmp_path / "c", script=DEFAULT_CHECK, FACT_REFERENCE_OPS="1", FACT_CUDA_GRAPHS="0")
    assert off.returncode == 0 and "GRAPHS False False" in off.stdout, off.stderr[-2000:]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU")
def test_cuda_graph_replay_matches_and_captures_again_after_an_update(plan, tmp_path):
    r = run_copied(composed(plan, "graphs"), tmp_path, script=GRAPH_CHECK, FACT_REFERENCE_OPS="1",
                   FACT_CUDA_GRAPHS="1")
    assert r.returncode == 0 and "GRAPHS ok" in r.stdout, r.stderr[-3000:]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a CUDA GPU")
def test_library_in_folder_without_gpu_names_the_arch(plan, tmp_path):
    lib_dir = tmp_path / "ops"
    lib_dir.mkdir()
    (lib_dir / "libfact_ops.so").write_bytes(b"\x7fELF not really")  # only its presence matters here
    folder = composed(plan, "with_lib", "--op-library", lib_dir / "libfact_ops.so")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["op_library"] == "libfact_ops.so" and (folder / "libfact_ops.so").is_file()
    assert {"kernels", "toolchain", "numerics", "arch"} <= set(manifest)
    r = run_copied(folder, tmp_path)
    assert r.returncode != 0
    assert "sm90" in r.stderr and "no CUDA GPU" in r.stderr


def test_missing_op_library_file_is_an_error_naming_it(plan):
    r = fact("compose", plan / "plan.json", plan / "tune.json", "--model", FIXTURE, "--out", plan / "bad",
             "--op-library", plan / "nope" / "libfact_ops.so")
    assert r.returncode != 0 and "nope/libfact_ops.so does not exist" in r.stderr
    assert not (plan / "bad").exists()
