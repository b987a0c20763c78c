"""Tests for `python -m fact.trace`: every benchmark problem traces on meta to a well-formed IR, and bad problem
files fail with exit code 2, one error line and no output file."""
import hashlib
import inspect
import json
import math
import os
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from fact.ir_encode import encode_value
from fact.problem import load_problem

REPO_ROOT = Path(__file__).resolve().parents[2]
PROBLEMS_DIR = REPO_ROOT / "bench" / "problems"
PROBLEMS = sorted(PROBLEMS_DIR.glob("level*/*.py"))
TRACED_OPS_FILE = REPO_ROOT / "docs" / "traced-ops.txt"
ERROR_PREFIX = "fact-trace: error: "

# Op counts some problems' graphs must contain (these ops, exactly these many times); every other problem
# (bench/problems grows with the suite) is checked for a well-formed IR and its output shape on meta.
EXPECTED_OPS = {
    "square_matmul_2048": {"aten.matmul.default": 1},
    "square_matmul_4096": {"aten.matmul.default": 1},
    "square_matmul_8192": {"aten.matmul.default": 1},
    "standard_matmul": {"aten.matmul.default": 1},
    "large_k_matmul": {"aten.matmul.default": 1},
    "batched_matmul": {"aten.bmm.default": 1},
    "minigpt_block": {"aten.linear.default": 4, "aten.layer_norm.default": 2, "aten.masked_fill.Scalar": 1,
                      "aten.softmax.int": 1, "aten.matmul.default": 2, "aten.split.Tensor": 1, "getitem": 3,
                      "aten.tanh.default": 1},
    "swish_absmax_rows": {"aten.sigmoid.default": 1, "aten.mul.Tensor": 2, "aten.abs.default": 1,
                          "aten.amax.default": 1, "aten.add.Tensor": 1, "aten.div.Tensor": 1},
    "llama3_block": {"aten.linear.default": 7, "aten.scaled_dot_product_attention.default": 1,
                     "aten.rsqrt.default": 2, "aten.silu.default": 1, "aten.cat.default": 2,
                     "aten.expand.default": 2},
    "swiglu_mlp": {"aten.linear.default": 3, "aten.sigmoid.default": 1, "aten.mul.Tensor": 2},
}
EXPECTED_OUTPUT_SHAPES = {
    "swish_absmax_rows": [16384, 4096],
    "square_matmul_2048": [2048, 2048],
    "square_matmul_4096": [4096, 4096],
    "square_matmul_8192": [8192, 8192],
    "standard_matmul": [1024, 2048],
    "large_k_matmul": [256, 256],
    "batched_matmul": [128, 128, 512],
    "minigpt_block": [128, 512, 768],
    "llama3_block": [2, 2048, 4096],
    "swiglu_mlp": [4, 2048, 2048],
}


def run_trace(model: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python"))
    return subprocess.run([sys.executable, "-m", "fact.trace", str(model), "-o", str(out), *extra],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """Traces every problem once (two at a time: each run is mostly torch's import), keyed by file stem."""
    out_dir = tmp_path_factory.mktemp("ir")

    def one(problem: Path):
        out = out_dir / f"{problem.stem}.json"
        return problem.stem, (run_trace(problem, out), out)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, PROBLEMS))


def refs_in(value):
    if isinstance(value, dict):
        if "ref" in value:
            yield value["ref"]
        return
    if isinstance(value, list):
        for v in value:
            yield from refs_in(v)


def meta_instance(problem_path: Path):
    problem = load_problem(problem_path)
    with torch.device("meta"):
        model = problem.model_class(*problem.get_init_inputs())
        inputs = problem.get_inputs()
    return problem, model, inputs


def test_problem_set_holds_the_checked_problems_and_unique_names():
    assert set(EXPECTED_OPS) <= {p.stem for p in PROBLEMS}
    assert len({p.stem for p in PROBLEMS}) == len(PROBLEMS), "traced IRs are keyed by file stem"


@pytest.mark.parametrize("problem_path", PROBLEMS, ids=lambda p: p.stem)
def test_problem_traces_to_valid_ir(problem_path, traced):
    result, out = traced[problem_path.stem]
    assert result.returncode == 0, result.stderr
    ir = json.loads(out.read_text())

    assert ir["format"] == "fact-ir" and ir["version"] == 1
    assert ir["trace_device"] == "meta"
    assert ir["torch_version"] == torch.__version__
    assert ir["source"]["sha256"] == hashlib.sha256(problem_path.read_bytes()).hexdigest()
    assert ir["source"]["module_class"] == "Model"

    problem, model, inputs = meta_instance(problem_path)
    assert ir["init_inputs"] == json.loads(json.dumps(problem.get_init_inputs()))

    nodes = ir["nodes"]
    names = [n["name"] for n in nodes]
    assert len(names) == len(set(names)), "node names must be unique"

    # User inputs: forward's parameter names, in get_inputs() order, with its shapes.
    input_nodes = [n for n in nodes if n["kind"] == "input"]
    forward_params = list(inspect.signature(model.forward).parameters)
    assert [n["target"] for n in input_nodes] == forward_params[:len(inputs)]
    assert [n["outputs"][0]["shape"] for n in input_nodes] == [list(t.shape) for t in inputs]

    # Parameters and buffers carry their state_dict names and shapes.
    state = model.state_dict()
    weights = {n["target"]: n for n in nodes if n["kind"] in ("parameter", "buffer")}
    assert set(weights) == set(state)
    for key, node in weights.items():
        assert node["outputs"][0]["shape"] == list(state[key].shape), key
        expected_kind = "parameter" if key in dict(model.named_parameters()) else "buffer"
        assert node["kind"] == expected_kind, key

    # Graph order is topological: every ref names an earlier node.
    seen = set()
    for node in nodes:
        assert node["kind"] in ("input", "parameter", "buffer", "constant", "op")
        for ref in refs_in([node.get("args", []), list(node.get("kwargs", {}).values())]):
            assert ref in seen, f"{node['name']} refers to {ref}, which is not an earlier node"
        seen.add(node["name"])
        for meta in node["outputs"]:
            assert len(meta["strides"]) == len(meta["shape"]), node["name"]
            # BatchNorm's num_batches_tracked is the one integer tensor a float32 problem holds.
            integer_ok = node["kind"] == "buffer" and node["name"].endswith("num_batches_tracked")
            assert meta["dtype"] in ("float32", "bool") or (integer_ok and meta["dtype"] == "int64"), node["name"]
    for ref in refs_in(ir["outputs"]):
        assert ref in seen

    ops = Counter(n["op"] for n in nodes if n["kind"] == "op")
    for op, count in EXPECTED_OPS.get(problem_path.stem, {}).items():
        assert ops[op] == count, f"{op}: expected {count}, traced {ops[op]}"

    (result_ref,) = ir["outputs"]
    result_node = nodes[names.index(result_ref["ref"])]
    with torch.no_grad():
        shape = EXPECTED_OUTPUT_SHAPES.get(problem_path.stem) or list(model(*inputs).shape)
    assert result_node["outputs"][0]["shape"] == shape
    expected_strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    assert result_node["outputs"][0]["strides"] == expected_strides


def test_minigpt_split_and_mask_encoding(traced):
    _, out = traced["minigpt_block"]
    nodes = {n["name"]: n for n in json.loads(out.read_text())["nodes"]}
    split = next(n for n in nodes.values() if n.get("op") == "aten.split.Tensor")
    assert len(split["outputs"]) == 3  # one description per piece
    getitems = [n for n in nodes.values() if n.get("op") == "getitem"]
    assert sorted(n["args"][1] for n in getitems) == [0, 1, 2]
    assert all(n["args"][0] == {"ref": split["name"]} for n in getitems)
    masked_fill = next(n for n in nodes.values() if n.get("op") == "aten.masked_fill.Scalar")
    assert masked_fill["args"][2] == {"float": "-inf"}


def test_traced_ops_list_matches_problems(traced):
    """docs/traced-ops.txt (the op table's checklist) must be exactly the ops the problems trace to."""
    traced_ops = set()
    for _, out in traced.values():
        traced_ops |= {n["op"] for n in json.loads(out.read_text())["nodes"] if n["kind"] == "op"}
    listed = [line for line in TRACED_OPS_FILE.read_text().splitlines() if line.strip()]
    assert listed == sorted(listed)
    assert set(listed) == traced_ops


def test_encode_value_covers_every_argument_kind():
    assert encode_value(3) == 3 and isinstance(encode_value(3), int)
    assert encode_value(3.0) == 3.0 and isinstance(encode_value(3.0), float)
    assert encode_value(True) is True and encode_value(None) is None and encode_value("mean") == "mean"
    assert encode_value(float("inf")) == {"float": "inf"}
    assert encode_value(float("-inf")) == {"float": "-inf"}
    assert encode_value(float("nan")) == {"float": "nan"}
    assert encode_value((1, [2, float("inf")])) == [1, [2, {"float": "inf"}]]
    assert encode_value(torch.bfloat16) == {"dtype": "bfloat16"}
    assert encode_value(torch.device("cuda:0")) == {"device": "cuda:0"}
    assert encode_value(torch.contiguous_format) == {"enum": "torch.contiguous_format"}
    assert encode_value(torch.strided) == {"enum": "torch.strided"}
    assert encode_value(slice(1, 2)) == {"repr": "slice(1, 2, None)"}


# --- bad input: exit code 2, one `fact-trace: error:` line naming the file and the reason, no output file ---

VALID_TAIL = """

def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
"""

BAD_FILES = {
    "no_model": ("import torch\n" + VALID_TAIL, ["no class `Model`"]),
    "no_get_inputs": ("import torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                      "        return x\n\n\ndef get_init_inputs():\n    return []\n", ["no function `get_inputs`"]),
    "syntax_error": ("import torch\n\n\nclass Model(\n    def forward(self x):\n", ["syntax_error.py:4: syntax error"]),
}


def assert_clean_failure(result: subprocess.CompletedProcess, out: Path, *fragments: str):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(ERROR_PREFIX), lines[0]
    for fragment in fragments:
        assert fragment in lines[0]
    assert not out.exists()


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_problem_file_fails_cleanly(case, tmp_path):
    source, reasons = BAD_FILES[case]
    model = tmp_path / f"{case}.py"
    model.write_text(source)
    out = tmp_path / "ir.json"
    out.write_text("stale IR from an earlier run")  # must not survive a failed trace
    assert_clean_failure(run_trace(model, out), out, str(model), *reasons)


def test_missing_file_fails_cleanly(tmp_path):
    model = tmp_path / "does_not_exist.py"
    out = tmp_path / "ir.json"
    assert_clean_failure(run_trace(model, out), out, str(model), "file not found")


def test_untraceable_module_is_an_ir_without_graph_and_a_note(tmp_path):
    """torch.export cannot follow a data-dependent branch: not an error but an IR whose replay_blocker names the
    line and the cause, so FACT leaves the whole module to PyTorch."""
    model = tmp_path / "data_dependent.py"
    model.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                     "        if x.sum() > 0:\n            return x * 2\n        return x\n" + VALID_TAIL)
    out = tmp_path / "ir.json"
    result = run_trace(model, out)
    assert result.returncode == 0, result.stderr
    ir = json.loads(out.read_text())
    assert ir["nodes"] == [] and ir["outputs"] == []
    assert "data_dependent.py:7: torch.export cannot trace Model.forward" in ir["replay_blocker"]
    assert "data-dependent" in ir["replay_blocker"]
    notes = [line for line in result.stderr.splitlines() if line.startswith("fact-trace: note:")]
    assert len(notes) == 1 and "leaves the whole module to PyTorch" in notes[0], result.stderr
