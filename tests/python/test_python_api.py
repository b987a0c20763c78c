"""FACT from Python (python/fact/api): fact.optimize and fact.explain on live modules, the module they return (the
original's parameters in place), fact.save / fact.load, torch.compile(backend="fact"), the `fact` console script,
and `pip install .` into a fresh venv. On a CPU machine nothing is realized: the results must equal the original's
and say why; the replay of FACT ops is checked with the PyTorch reference ops (FACT_REFERENCE_OPS=1)."""
import importlib.util
import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from composed_module import REPO_ROOT, fact, needs_fact_binary, report_accepting

import fact as fact_api  # noqa: E402  (conftest put this checkout's python/ first)
from fact.api import live_problem
from fact.api.optimized_module import OptimizedModule
from fact.api.core import FactError
from fact.api.results import Report

needs_core = pytest.mark.skipif(
    importlib.util.find_spec("fact._core") is None,
    reason="fact._core is not built: scripts/bootstrap installs the package into .venv (pip install -e .)")
pytestmark = needs_core


def _tiny_mlp_module():
    """tests/python/data/compose/tiny_mlp.py (Linear, written-out tanh-GELU, Linear, residual add: two GEMM
    patterns), the composer tests' fixture."""
    spec = importlib.util.spec_from_file_location("api_tiny_mlp", REPO_ROOT / "tests/python/data/compose/tiny_mlp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_TINY_MLP = _tiny_mlp_module()


def tiny_mlp(dim=16, hidden=32):
    return _TINY_MLP.Model(dim, hidden)


class DataDependent(nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x - 1  # torch.export cannot follow a branch on a value


class DataDependentFree(nn.Module):
    def forward(self, x, mask):
        return (x * 2).masked_fill(mask == 0, 0.0)


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def test_explain_plans_a_live_module_without_a_gpu(cache):
    plan = fact_api.explain(tiny_mlp().eval(), (torch.randn(4, 8, 16),), cache_dir=cache)
    rules = sorted(p["rule"] for p in plan.patterns)
    assert rules == ["gemm_bias_gelu_tanh", "gemm_bias_residual"], rules
    assert "gemm_bias_gelu_tanh" in str(plan) and plan.table, "the plan prints as fact discover's table"
    assert plan["conv_numerics"] == "tf32"
    fp32_convs = fact_api.explain(tiny_mlp().eval(), (torch.randn(4, 8, 16),), cache_dir=cache, conv_numerics="3xtf32")
    assert fp32_convs["conv_numerics"] == "3xtf32" and "against cuDNN with TF32 off" in str(fp32_convs)
    with pytest.raises(FactError, match="conv_numerics='bf16' is not one FACT knows"):
        fact_api.explain(tiny_mlp().eval(), (torch.randn(4, 8, 16),), cache_dir=cache, conv_numerics="bf16")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks what a machine without a CUDA GPU gets")
def test_optimize_without_gpu_returns_the_original_computation_and_says_why(cache):
    model = tiny_mlp().eval()
    x = torch.randn(4, 8, 16)
    optimized = fact_api.optimize(model, (x,), cache_dir=cache, progress=False)
    assert isinstance(optimized, OptimizedModule) and optimized.original is model
    assert not optimized.uses_fact_ops and optimized.report.fact_ops == []
    assert "no CUDA GPU" in optimized.report["needs_gpu"]
    assert len(optimized.report["patterns"]) == 2
    assert all(not p["accepted"] and p["why"] for p in optimized.report["patterns"])
    with torch.no_grad():
        assert torch.equal(optimized(x), model(x))
    assert "fc1.weight" in dict(optimized.original.named_parameters())
    assert optimized.report.markdown.startswith("#"), "the report prints as report.md"
    assert optimized.report["reused"] is False
    assert fact_api.optimize(model, (x,), cache_dir=cache, progress=False).report["reused"] is True, \
        "a second call for the same graph and settings takes the first one's result"
    assert fact_api.optimize(model, (x,), cache_dir=cache, progress=False, top=2).report["reused"] is False
    assert fact_api.optimize(model, (x,), cache_dir=cache, progress=False, reuse=False).report["reused"] is False


def test_a_hugging_face_model_returning_a_model_output(cache):
    """GPT-2 (random weights from a small config) returns a ModelOutput: the worker that loads the exported program
    must import transformers' output types first."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=32, use_cache=False,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 128, (2, 16))
    plan = fact_api.explain(model, (ids,), cache_dir=cache)
    assert any(p["family"] == "gemm" for p in plan.patterns), str(plan)
    optimized = fact_api.optimize(model, (ids,), cache_dir=cache, progress=False)
    assert "left_to_pytorch" not in optimized.report, optimized.report.get("left_to_pytorch")
    with torch.no_grad():
        assert torch.equal(optimized(ids).logits, model(ids).logits)


class Positions(nn.Module):
    """Creates a tensor in forward on its input's device, as Hugging Face models make position ids: the exported
    program names that device (arange(..., device=cuda:0) for a module exported on a GPU)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, 16)
        self.fc = nn.Linear(16, 16)

    def forward(self, ids):
        return self.fc(self.emb(ids) + self.emb(torch.arange(ids.shape[-1], device=ids.device)))


def test_the_program_builds_where_the_tracer_builds(cache):
    """The tracer builds the exported module on meta: creation ops that name the export's device must follow
    (on the H100, GPT-2 exported on cuda:0 failed on meta and on cpu, and the whole model stayed PyTorch's)."""
    problem = live_problem.export(Positions().eval(), (torch.randint(0, 64, (2, 8)),), cache, {})
    live_problem.write(problem, "Positions")
    spec = importlib.util.spec_from_file_location("live_positions", problem.model_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with torch.device("meta"):
        model = module.Model()
        out = torch.export.export(model, (torch.zeros(2, 8, dtype=torch.long),)).module()(
            torch.zeros(2, 8, dtype=torch.long))
    assert out.device.type == "meta" and out.shape == (2, 8, 16)
    plan = fact_api.explain(Positions().eval(), (torch.randint(0, 64, (2, 8)),), cache_dir=cache)
    # The linear, and the add of the position embeddings ([8, 16], one row shared by the batch) as a generated kernel.
    assert sorted(p["rule"] for p in plan.patterns) == ["gemm", "rowwise_generated"], str(plan)


def test_a_module_export_cannot_trace_stays_pytorchs(cache):
    model = DataDependent()
    optimized = fact_api.optimize(model, torch.randn(3), cache_dir=cache, progress=False)
    assert "torch.export cannot trace DataDependent.forward" in optimized.report["left_to_pytorch"]
    x = torch.randn(3)
    assert torch.equal(optimized(x), model(x))
    with pytest.raises(fact_api.FactError, match="stayed PyTorch's whole"):
        fact_api.save(optimized, cache / "artifact")


def test_checks_draw_fresh_inputs_but_keep_the_marked_ones(cache):
    model, x, mask = DataDependentFree(), torch.randn(4, 8), torch.tril(torch.ones(4, 8))
    problem = live_problem.export(model, (x, mask), cache, {}, keep=(False, True))
    live_problem.write(problem, "DataDependentFree")
    spec = importlib.util.spec_from_file_location("live_problem_under_test", problem.model_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fresh_x, kept_mask = module.get_inputs()
    assert torch.equal(kept_mask, mask) and not torch.equal(fresh_x, x) and fresh_x.shape == x.shape
    assert torch.equal(module.Model()(x, mask), model(x, mask)), "the program replays the module"


def test_the_gpus_architecture_is_one_the_core_knows(monkeypatch):
    from fact.api import optimize as api
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "test GPU")
    for capability, arch in (((9, 0), "sm90"), ((8, 0), "sm80"), ((8, 9), "sm80")):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, c=capability: c)
        assert api.gpu_arch() == arch, capability
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (10, 0))
    with pytest.raises(fact_api.FactError, match="FACT has kernels for sm80, sm90; this GPU \\(test GPU\\) is sm100"):
        api.gpu_arch()


def test_bad_input_is_a_clear_error(cache):
    with pytest.raises(fact_api.FactError, match="must be a torch.nn.Module"):
        fact_api.optimize(lambda x: x, (torch.randn(2),), cache_dir=cache)
    with pytest.raises(fact_api.FactError, match="example_inputs is a dict"):
        fact_api.optimize(tiny_mlp(), {"x": torch.randn(4, 16)}, cache_dir=cache)
    with pytest.raises(fact_api.FactError, match="numerics"):
        fact_api.optimize(tiny_mlp().eval(), (torch.randn(4, 16),), numerics="fp64", cache_dir=cache, progress=False)


def composed_with_gemms_accepted(module, args, cache, tag):
    """A live module's composed folder with its GEMM patterns accepted (op names carry `tag`)."""
    problem = live_problem.export(module, args, cache, {"test": tag})
    live_problem.write(problem, type(module).__name__)
    plan_file, tune_file, composed = problem.folder / "plan.json", problem.folder / "tune.json", problem.folder / "c"
    r = fact("discover", problem.model_file, "--json", plan_file)
    assert r.returncode == 0, r.stderr
    tune_file.write_text(json.dumps(report_accepting(json.loads(plan_file.read_text()), {"gemm"}, tag)))
    r = fact("compose", plan_file, tune_file, "--model", problem.model_file, "--out", composed)
    assert r.returncode == 0, r.stderr
    return composed


@needs_fact_binary
def test_replay_reads_the_live_modules_parameters(cache, monkeypatch):
    """A composed graph with both GEMM patterns accepted (reference ops on the CPU) runs on the live module's
    parameters: after an in-place update the next call follows it, as the original does."""
    model = tiny_mlp().eval()
    x = torch.randn(4, 8, 16)
    composed = composed_with_gemms_accepted(model, (x,), cache, "api")
    monkeypatch.setenv("FACT_REFERENCE_OPS", "1")
    optimized = OptimizedModule(model, composed, Report({}))
    assert optimized.uses_fact_ops
    replay, calls = optimized._graph._replay, []
    monkeypatch.setattr(optimized._graph, "_replay", lambda self, flat: calls.append(1) or replay(self, flat))
    with torch.no_grad():
        torch.testing.assert_close(optimized(x), model(x), rtol=1e-5, atol=1e-5)
        model.fc2.weight.mul_(-2.0)
        want = model(x)
        got = optimized(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert len(calls) == 2, "both calls ran the composed graph, not the original forward"
    source = (composed / "model_new.py").read_text()
    assert "torch.ops.fact.gemm_api" in source and "def _replay(self, flat):" in source


@needs_fact_binary
def test_backend_compiles_the_composed_graph_with_inductor_and_keeps_the_faster(cache, monkeypatch):
    """The second half of backend="fact" on the CPU, with reference ops: Dynamo's graph (parameters as inputs),
    composed with FACT's GEMM ops, traced to an FX graph with torch.ops.fact calls, compiled by Inductor, checked
    against the graph and timed against Inductor alone."""
    from fact.api import dynamo_backend

    captured = {}

    def capture(gm, example_inputs):
        captured.update(gm=gm, inputs=example_inputs)
        return gm.forward

    torch._dynamo.reset()
    model, x = tiny_mlp().eval(), torch.randn(4, 8, 16)
    with torch.no_grad():
        torch.compile(model, backend=capture)(x)
    gm, inputs = captured["gm"], captured["inputs"]
    assert len(inputs) > 1, "Dynamo passes the parameters as inputs"
    keep = dynamo_backend.module_state_inputs(gm, inputs)
    assert keep.count(True) == 4 and [i.shape for i, k in zip(inputs, keep) if not k] == [x.shape], \
        "the four parameters are kept as they are, the input is drawn afresh"
    composed = composed_with_gemms_accepted(gm, tuple(inputs), cache, "dyn")
    monkeypatch.setenv("FACT_REFERENCE_OPS", "1")
    optimized = OptimizedModule(gm, composed, Report({}))
    assert optimized.uses_fact_ops
    decision = {}
    with torch.no_grad():
        alone = dynamo_backend.inductor(gm, inputs)
        compiled = dynamo_backend.choose(gm, inputs, optimized, alone, decision)
        got, want = compiled(*inputs), gm(*inputs)
    torch.testing.assert_close(got, want)
    assert decision["used"] in ("fact", "inductor") and decision["fact_ms"] > 0 and decision["inductor_ms"] > 0, \
        "the FACT graph compiled, matched the graph and was timed against Inductor alone"
    assert "ms vs" in decision["why"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="round trip of a module without FACT ops (CPU machine)")
def test_save_and_load_round_trip_and_refuse_another_torch(cache, tmp_path):
    model = tiny_mlp().eval()
    x = torch.randn(4, 8, 16)
    optimized = fact_api.optimize(model, (x,), cache_dir=cache, progress=False)
    with torch.no_grad():
        model.fc1.bias.add_(1.0)  # saved weights are the module's current ones
    folder = fact_api.save(optimized, tmp_path / "artifact")
    artifact = json.loads((folder / "artifact.json").read_text())
    assert artifact["torch"] == torch.__version__ and artifact["fact_ops"] == []
    loaded = fact_api.load(folder)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x))
    assert loaded.report["patterns"], "the report travels with the artifact"
    artifact["torch"] = "1.0.0"
    (folder / "artifact.json").write_text(json.dumps(artifact))
    with pytest.raises(fact_api.FactError, match="built for torch 1.0.0"):
        fact_api.load(folder)
    with pytest.raises(fact_api.FactError, match="not a FACT artifact"):
        fact_api.load(tmp_path)
    (tmp_path / "other").mkdir()
    with pytest.raises(fact_api.FactError, match="is not a FACT artifact: choose a new folder"):
        fact_api.save(optimized, tmp_path / "other")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback of a machine without a CUDA GPU")
def test_torch_compile_backend_is_found_and_falls_back_to_inductor_on_cpu():
    from fact.api import dynamo_backend

    assert "fact" in {e.name for e in entry_points(group="torch_dynamo_backends")}
    torch._dynamo.reset()
    model = tiny_mlp().eval()
    x = torch.randn(4, 8, 16)
    compiled = torch.compile(model, backend="fact")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    assert dynamo_backend.decisions and dynamo_backend.decisions[-1]["used"] == "inductor"
    assert "no CUDA GPU" in dynamo_backend.decisions[-1]["why"]
    torch._dynamo.reset()
    with torch.no_grad(), pytest.raises(Exception, match="not fact.optimize's"):
        torch.compile(model, backend="fact", options={"tile": 128})(x)


def test_console_script_runs_the_command_line():
    r = subprocess.run([sys.executable, "-m", "fact.cli", "--version"], capture_output=True, text=True,
                       cwd=REPO_ROOT, timeout=120)
    from fact.api.core import core
    assert r.returncode == 0 and r.stdout.strip() == core().__version__, (r.stdout, r.stderr)
    r = subprocess.run([sys.executable, "-m", "fact.cli", "discover", "/no/such/model.py"], capture_output=True,
                       text=True, cwd=REPO_ROOT, timeout=120)
    assert r.returncode != 0 and "no/such/model.py" in r.stderr


@pytest.mark.skipif(os.environ.get("FACT_TEST_PIP_INSTALL") != "1",
                    reason="builds the package once more (minutes on 2 cores): .ci/run sets FACT_TEST_PIP_INSTALL=1")
def test_pip_install_into_a_fresh_venv(tmp_path):
    """`pip install .` (scikit-build-core building fact._core) into a new venv, then import and the console script.
    The venv sees this one's packages (torch), so only FACT is installed; the build folder is kept between runs."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([sys.executable, "-c", "import site; print(site.getsitepackages()[0])"], check=True,
                          capture_output=True, text=True).stdout.strip()
    # The new venv reads this interpreter's packages (torch, scikit-build-core) through a .pth file.
    venv_site = subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"], check=True,
                               capture_output=True, text=True).stdout.strip()
    (Path(venv_site) / "outer.pth").write_text(site + "\n")
    r = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q",
                        "-C", f"build-dir={REPO_ROOT / 'build-wheel'}", str(REPO_ROOT)],
                       capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FACT_HOME", "FACT_PYTHON_DIR")}
    check = ("import fact, pathlib; from fact.api import core; c = core.core(); "
             "import fact.paths as p; print(pathlib.Path(fact.__file__).parent, p.fact_home(), c.__version__)")
    r = subprocess.run([str(py), "-c", check], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    package, home, version = r.stdout.split()
    assert package.startswith(str(venv)) and home == str(Path(package) / "_share"), r.stdout
    assert (Path(home) / "data" / "families").is_dir()
    r = subprocess.run([str(venv / "bin" / "fact"), "--version"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == version, (r.stdout, r.stderr)
