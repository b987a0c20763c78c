"""The one list of kernel families on the Python side: family_cases reads data/families/*.json (found as the
C++ finds it: $FACT_HOME/data, else this checkout's), each family's python_case module parses its problems
and measures them, GEMM included; and the realize package imports without a circle."""
from __future__ import annotations

import ast
import importlib
import json

import pytest

from conftest import PYTHON_DIR, REPO_ROOT
from fact import paths
from fact.realize import family_cases, kernel_abi, verify
from fact.realize.gemm_case import GemmCase, GemmProblem
from fact.realize.measure_case import MeasureCase
from fact.realize.measure_request import RequestError, parse_request
from fact.realize.problem_fields import ProblemError

GEMM = {"m": 64, "n": 32, "k": 16, "dtype": "float32"}


def test_the_families_are_the_data_files():
    files = sorted((REPO_ROOT / "data" / "families").glob("*.json"))
    assert family_cases.FAMILIES == tuple(f.stem for f in files)
    assert {"gemm", "normalization", "attention", "rope", "rowwise", "conv"} <= set(family_cases.FAMILIES)
    for f in files:
        module = family_cases.case_module(f.stem)
        assert module.__name__ == json.loads(f.read_text())["python_case"]
        assert callable(module.parse_problem) and issubclass(module.Case, MeasureCase), f.stem
        assert module.Case.family == f.stem and module.Case.args_type is not None
        # The case takes the struct and workspace its family's "abi" section declares (kernel_abi.py's mirror).
        assert module.Case.args_type is kernel_abi.args_type(f.stem), f.stem
        assert module.Case.has_workspace == kernel_abi.has_workspace(f.stem), f.stem
    with pytest.raises(ValueError, match="'deconv' is not one of attention, conv, gemm"):
        family_cases.case_module("deconv")


def test_data_dir_follows_fact_home(tmp_path, monkeypatch):
    monkeypatch.delenv("FACT_HOME", raising=False)
    assert paths.data_dir() == REPO_ROOT / "data"
    folder = tmp_path / "data" / "families"
    folder.mkdir(parents=True)
    monkeypatch.setenv("FACT_HOME", str(tmp_path))
    assert paths.data_dir() == tmp_path / "data"
    with pytest.raises(family_cases.FamilyDataError, match="no family data files; set FACT_HOME"):
        family_cases.read_case_modules()
    (folder / "gemm.json").write_text(json.dumps({"family": "gemm", "python_case": "fact.realize.gemm_case"}))
    assert family_cases.read_case_modules() == {"gemm": "fact.realize.gemm_case"}
    (folder / "conv.json").write_text(json.dumps({"family": "convolution", "python_case": "fact.realize.conv_case"}))
    with pytest.raises(family_cases.FamilyDataError, match=r"conv.json: \"family\" must be \"conv\""):
        family_cases.read_case_modules()
    (folder / "conv.json").write_text(json.dumps({"family": "conv"}))
    with pytest.raises(family_cases.FamilyDataError, match=r"conv.json: \"python_case\" must name"):
        family_cases.read_case_modules()


def test_gemm_problems_parse_through_the_registry():
    p = family_cases.parse_family_problem("gemm", {**GEMM, "layout_b": "col", "epilogue": "bias_gelu_tanh"}, "x")
    assert p == GemmProblem(64, 32, 16, 1, "row", "col", "float32", "fp32", "bias_gelu_tanh")
    case = family_cases.case_for("gemm", p)
    assert isinstance(case, GemmCase) and case.has_workspace
    assert case.tolerance() == verify.tolerance("fp32", 16)
    assert case.tolerance_table()["at_this_k"]["tf32"] == verify.tolerance("tf32", 16)
    with pytest.raises(ProblemError, match=r"x\.numerics: 'bf16' does not go with dtype 'float32'"):
        family_cases.parse_family_problem("gemm", {**GEMM, "numerics": "bf16"}, "x")
    with pytest.raises(ProblemError, match=r"x\.k: missing"):
        family_cases.parse_family_problem("gemm", {"m": 1, "n": 1, "dtype": "float16"}, "x")
    # A request that names its family (as `fact tune` now writes them) and one that does not are the same.
    named = parse_request({"family": "gemm", "problem": GEMM})
    assert named == parse_request({"problem": GEMM}) and named.family == "gemm"
    with pytest.raises(RequestError, match=r"request\.problem\.epilogue: 'gelu' is not one of"):
        parse_request({"family": "gemm", "problem": {**GEMM, "epilogue": "gelu"}})


def test_the_family_tolerances_stay_apart():
    """Only GEMM reports the table by K; the other cases report their own bound (as before the merge)."""
    from fact.realize.norm_case import NormCase, parse_problem
    norm = NormCase(parse_problem({"kind": "rms_norm", "rows": 4, "cols": 64, "eps": 1e-5, "dtype": "float32"}))
    assert set(norm.tolerance_table()) == {"why"} and norm.pre_kernel() is None
    assert norm.fp32_reference_err(None, None) is None


def realize_imports() -> dict[str, set[str]]:
    """fact.realize module -> the fact.realize modules it imports (anywhere in the file)."""
    folder = PYTHON_DIR / "fact" / "realize"
    names = {p.stem for p in folder.glob("*.py")}
    graph = {}
    for p in folder.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level == 1 and module:
                    deps.add(module)
                elif node.level == 1 or module == "fact.realize":
                    deps.update(a.name for a in node.names)
                elif module.startswith("fact.realize."):
                    deps.add(module.split(".")[2])
        graph[p.stem] = deps & names - {p.stem}
    return graph


def test_realize_has_no_import_circle():
    graph = realize_imports()
    assert "verify" in graph["gemm_case"] and "family_cases" in graph["measure_request"]  # the walk sees imports
    state: dict[str, str] = {}

    def visit(m, path):
        state[m] = "open"
        for d in sorted(graph[m]):
            assert state.get(d) != "open", "import circle: " + " -> ".join(path + [m, d])
            if d not in state:
                visit(d, path + [m])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    # The case modules are imported by name from the data files; none may import the registry back.
    for family in family_cases.FAMILIES:
        assert "family_cases" not in graph[family_cases.CASE_MODULES[family].rsplit(".", 1)[1]]
    importlib.import_module("fact.realize.op_check")  # and everything imports for real
