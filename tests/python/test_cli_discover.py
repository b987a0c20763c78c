"""Tests for `fact discover` (stage 1) through the built binary: the MiniGPT plan, and one clear error for each
bad input, with a non-zero exit code and no --json file left behind.

The binary is $FACT_BIN, else <repo>/build/fact. Each traced .py costs a torch import (~3 s), so the traced
cases run once, two at a time, in a module-scoped fixture; the rest fail before any Python runs."""
import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FACT_BIN = Path(os.environ.get("FACT_BIN") or REPO_ROOT / "build" / "fact")
MINIGPT = REPO_ROOT / "bench" / "problems" / "level3" / "minigpt_block.py"
IR_FIXTURES = REPO_ROOT / "tests" / "cpp" / "data" / "ir"
RULES_DIR = REPO_ROOT / "data" / "rules"

pytestmark = pytest.mark.skipif(not FACT_BIN.is_file() or not os.access(FACT_BIN, os.X_OK),
                                reason=f"fact binary not found at {FACT_BIN} (build it, or set FACT_BIN)")

VALID_TAIL = """

def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
"""
NO_MODEL = "import torch\n" + VALID_TAIL
DATA_DEPENDENT = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                  "        if x.sum() > 0:\n            return x * 2\n        return x\n" + VALID_TAIL)


def discover(model: Path, json_out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(FACT_BIN), "discover", str(model), "--json", str(json_out), *extra],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """`fact discover` on each case that runs the tracer, once, keyed by case name: (result, json path, model)."""
    work = tmp_path_factory.mktemp("discover")
    (work / "no_model.py").write_text(NO_MODEL)
    (work / "data_dependent.py").write_text(DATA_DEPENDENT)
    cases = {"minigpt": MINIGPT, "no_model": work / "no_model.py", "data_dependent": work / "data_dependent.py"}

    def one(item):
        name, model = item
        out = work / f"{name}.plan.json"
        extra = ("--ir", str(work / f"{name}.ir.json"))
        return name, (discover(model, out, *extra), out, model)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, cases.items()))


def assert_one_clear_error(result: subprocess.CompletedProcess, json_out: Path, *fragments: str) -> str:
    """Non-zero exit, exactly one error line holding every fragment, no traceback, no plan file."""
    assert result.returncode != 0, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], f"{fragment!r} not in {errors[0]!r}"
    assert "Traceback" not in result.stderr
    assert "Plan written" not in result.stdout
    assert not json_out.exists(), "a failed run left a --json file"
    return errors[0]


# --- the plan ---

def test_minigpt_plan(traced):
    result, out, _ = traced["minigpt"]
    assert result.returncode == 0, result.stderr
    assert f"Plan written to {out}" in result.stdout
    plan = json.loads(out.read_text())
    assert plan["format"] == "fact-plan" and plan["version"] == 1
    assert plan["arch"] == "sm90"
    assert plan["numerics"] == "3xtf32" and plan["baseline_numerics"] == "fp32"  # float32 module -> 3xtf32
    assert plan["source"].endswith("minigpt_block.py")
    rules = [p["rule"] for p in plan["patterns"]]
    assert sorted(rules) == sorted(["sdpa_attention_manual", "gemm_bias_gelu_tanh", "gemm_bias_residual",
                                    "gemm_bias_residual", "layer_norm", "layer_norm", "gemm"])
    assert [p["rank"] for p in plan["patterns"]] == list(range(1, len(rules) + 1))
    gains = [p["cost"]["gain_us"] for p in plan["patterns"]]
    assert gains == sorted(gains, reverse=True)
    assert max(rules.index("sdpa_attention_manual"), rules.index("gemm_bias_gelu_tanh")) < rules.index("layer_norm")
    assert plan["estimate"]["us_planned"] < plan["estimate"]["us_now"]
    assert plan["uncovered_ops"] == {"aten.contiguous.default": 1, "aten.eq.Scalar": 1}
    node_names = {n["name"] for n in plan["ir"]["nodes"]}
    for p in plan["patterns"]:
        assert set(p["nodes"]) <= node_names and p["anchor"] in p["nodes"]
    # The printed table names every pattern, and the --ir file holds the same graph.
    for rule in set(rules):
        assert rule in result.stdout
    ir = json.loads((out.parent / "minigpt.ir.json").read_text())
    assert ir["nodes"] == plan["ir"]["nodes"]
    # Progress goes to stderr, the plan to stdout.
    assert "[3/3]" in result.stderr and "[3/3]" not in result.stdout


def test_ir_json_input_gives_the_same_plan(tmp_path):
    out = tmp_path / "plan.json"
    result = discover(IR_FIXTURES / "large_k_matmul.json", out, "--arch", "sm80", "--numerics", "tf32")
    assert result.returncode == 0, result.stderr
    plan = json.loads(out.read_text())
    assert plan["arch"] == "sm80" and plan["numerics"] == "tf32"
    assert [p["rule"] for p in plan["patterns"]] == ["large_k_gemm"]
    assert plan["patterns"][0]["dims"]["K"] == 131072
    assert plan["conv_numerics"] == "tf32", "PyTorch's cuDNN default"


def test_conv_numerics_option_is_in_the_plan(tmp_path):
    out = tmp_path / "plan.json"
    result = discover(IR_FIXTURES / "large_k_matmul.json", out, "--conv-numerics", "3xtf32")
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["conv_numerics"] == "3xtf32"
    assert "convolutions 3xtf32 against cuDNN with TF32 off" in result.stdout
    bad = discover(IR_FIXTURES / "large_k_matmul.json", tmp_path / "bad.json", "--conv-numerics", "bf16")
    assert bad.returncode != 0 and "--conv-numerics" in bad.stderr and not (tmp_path / "bad.json").exists()


# --- bad input: one clear error, exit != 0, no --json file ---

def test_file_without_model(traced):
    result, out, model = traced["no_model"]
    assert_one_clear_error(result, out, str(model), "no class `Model`")
    assert not (out.parent / "no_model.ir.json").exists()


def test_untraceable_module_is_left_to_pytorch_whole(traced):
    """Not an error: the plan is empty and says, in one line, which module and why."""
    result, out, model = traced["data_dependent"]
    assert result.returncode == 0, result.stderr
    plan = json.loads(out.read_text())
    assert plan["patterns"] == []
    left = plan["left_to_pytorch"]
    assert left.startswith("the whole module") and "data_dependent.py:7" in left, left
    assert "torch.export cannot trace Model.forward" in left and "data-dependent" in left
    assert "Left to PyTorch: the whole module" in result.stdout
    assert "Traceback" not in result.stderr


def test_missing_model_file(tmp_path):
    for missing in (tmp_path / "nowhere.py", tmp_path / "nowhere.json"):
        out = tmp_path / "plan.json"
        assert_one_clear_error(discover(missing, out), out, str(missing))


def write_ir(path: Path, edit) -> Path:
    doc = json.loads((IR_FIXTURES / "standard_matmul.json").read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return path


def test_op_no_table_knows_is_left_to_pytorch(tmp_path):
    """Open world: an op FACT has never heard of is not an error; the plan leaves it to PyTorch and says so."""
    def rename_op(doc):
        node = next(n for n in doc["nodes"] if n["kind"] == "op")
        node["op"] = "aten.frobnicate.default"

    ir = write_ir(tmp_path / "unknown_op.json", rename_op)
    out = tmp_path / "plan.json"
    result = discover(ir, out)
    assert result.returncode == 0, result.stderr
    assert "Left to PyTorch: aten.frobnicate.default x1" in result.stdout
    assert json.loads(out.read_text())["left_to_pytorch"] == "aten.frobnicate.default x1"


def test_malformed_ir_json(tmp_path):
    ir = tmp_path / "broken.json"
    ir.write_text('{"format": "fact-ir", "version": 1, "nodes": [')
    out = tmp_path / "plan.json"
    assert_one_clear_error(discover(ir, out), out, str(ir), "not valid JSON")


def test_ir_missing_field(tmp_path):
    ir = write_ir(tmp_path / "no_outputs.json", lambda doc: doc.pop("outputs"))
    out = tmp_path / "plan.json"
    assert_one_clear_error(discover(ir, out), out, "no_outputs.json", "'outputs'")


def test_malformed_rule_file(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    shutil.copy(RULES_DIR / "gemm.json", rules / "gemm.json")
    broken = json.loads((RULES_DIR / "layer_norm.json").read_text())
    del broken["family"]
    (rules / "layer_norm.json").write_text(json.dumps(broken))
    out = tmp_path / "plan.json"
    assert_one_clear_error(discover(IR_FIXTURES / "standard_matmul.json", out, "--rules", str(rules)), out,
                           "layer_norm.json", "'family'")


def test_rule_file_not_json(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "gemm.json").write_text("{ not json")
    out = tmp_path / "plan.json"
    assert_one_clear_error(discover(IR_FIXTURES / "standard_matmul.json", out, "--rules", str(rules)), out,
                           "gemm.json", "not valid JSON")


def assert_option_rejected(result: subprocess.CompletedProcess, json_out: Path, option: str, value: str):
    """The option parser's one line (plus its --help hint) names the option, the value and the valid ones."""
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line and not line.startswith("Run with --help")]
    assert len(lines) == 1, result.stderr
    assert option in lines[0] and value in lines[0] and "not in" in lines[0], lines[0]
    assert result.stdout == ""
    assert not json_out.exists()


def test_unknown_arch(tmp_path):
    out = tmp_path / "plan.json"
    result = discover(IR_FIXTURES / "standard_matmul.json", out, "--arch", "sm70")
    assert_option_rejected(result, out, "--arch", "sm70")
    assert "sm90" in result.stderr  # lists what is valid


def test_unknown_numerics(tmp_path):
    out = tmp_path / "plan.json"
    result = discover(IR_FIXTURES / "standard_matmul.json", out, "--numerics", "fp8")
    assert_option_rejected(result, out, "--numerics", "fp8")


def test_a_family_data_file_without_its_family_is_an_error_not_an_abort(tmp_path):
    """data/families is read while the commands are set up: a file naming a family this build lacks is one error
    line and exit 1 (it once escaped as std::terminate)."""
    home = tmp_path / "home"
    shutil.copytree(REPO_ROOT / "data", home / "data")
    shutil.copytree(REPO_ROOT / "templates", home / "templates")
    (home / "data" / "families" / "deconv.json").write_text('{"family": "deconv"}')
    r = subprocess.run([str(FACT_BIN), "discover", str(IR_FIXTURES / "minigpt_block.json")], capture_output=True,
                       text=True, cwd=REPO_ROOT, timeout=60, env={**os.environ, "FACT_HOME": str(home)})
    assert r.returncode == 1, r.stderr
    assert "deconv.json describes kernel family 'deconv'" in r.stderr and "terminate" not in r.stderr
