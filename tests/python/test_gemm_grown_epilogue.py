"""Grown GEMM epilogues on the Python side (issue 16): the tree evaluator of compose/reference/gemm.py with vec<i>
slots and activations with params equals PyTorch's ops run on CPU; gemm_case makes every slot's input, and its
float64 reference, PyTorch baseline and ctypes arguments read them."""
from __future__ import annotations

import ctypes

import pytest

from fact.compose.reference import gemm as ref_gemm
from fact.realize import verify
from fact.realize.gemm_case import GemmCase, GemmProblem, parse_epilogue, torch_epilogue_gemm
from fact.realize.problem_fields import ProblemError

LINEAR = ["add", ["mul", "alpha", "acc"], {"row": "bias"}]
LEAKY = ["leaky_relu", ["mul", LINEAR, 2.0], {"negative_slope": 0.1}]
BATCHNORM = ["relu", ["add", ["mul", ["mul", ["sub", LINEAR, {"row": "vec0"}], ["rsqrt", ["add", {"row": "vec1"}, 1e-05]]],
                             {"row": "vec2"}], {"row": "vec3"}]]
MIXED = ["add", ["softplus", ["mul", ["mul", {"scalar": "vec4"}, "acc"], {"col": "vec1"}], {"beta": 2.0, "threshold": 10.0}],
         ["hardtanh", "residual", {"min_val": -0.5, "max_val": 0.5}]]


def tables():
    return ref_gemm.load_epilogue_tables()


def test_tree_text_and_slots_follow_the_cpp_forms():
    assert ref_gemm.tree_text(LEAKY) == "leaky_relu[negative_slope=0.1](mul(add(mul(alpha,acc),row(bias)),2))"
    assert ref_gemm.tree_text(["elu", "acc", {"scale": 2, "alpha": 1.5, "input_scale": 1}]) == \
        "elu[alpha=1.5,input_scale=1,scale=2](acc)"
    assert ref_gemm.tree_text({"scalar": "vec2"}) == "scalar(vec2)"
    assert ref_gemm.vector_slots(BATCHNORM) == ["vec0", "vec1", "vec2", "vec3"]
    assert ref_gemm.vector_slots(MIXED) == ["vec1", "vec4"]
    assert ref_gemm.tree_slots(MIXED) == {"vec4": "scalar", "vec1": "col"}
    assert ref_gemm.tree_leaves(LEAKY) == {"alpha", "acc", "row"}  # the params object is not a leaf


@pytest.mark.parametrize("bad, message", [
    (["add", "acc", {"row": "vec8"}], "vec0'..'vec7"),
    (["add", "acc", {"scalar": "bias"}], "{'scalar': 'vec<i>'}"),
    (["leaky_relu", "acc"], "'negative_slope' is missing"),
    (["leaky_relu", "acc", {"negative_slope": "0.1"}], "not a number"),
    (["relu", "acc", {"slope": 1.0}], "has no param 'slope'"),
    (["leaky_relu", "acc", {"negative_slope": 0.1}, 1], "takes one operand"),
])
def test_bad_trees_are_errors_naming_the_node(bad, message):
    with pytest.raises(ValueError, match=None) as e:
        ref_gemm.check_tree(bad, tables()[1])
    assert message in str(e.value)
    with pytest.raises(ProblemError):
        parse_epilogue(bad, "request.problem.epilogue")


def test_evaluator_equals_pytorch_ops_on_cpu():
    torch = pytest.importorskip("torch")
    _, activations = tables()
    g = torch.Generator().manual_seed(0)
    m, n = 6, 5
    acc = torch.randn(m, n, generator=g, dtype=torch.float64)
    bias = torch.randn(n, generator=g, dtype=torch.float64)
    residual = torch.randn(m, n, generator=g, dtype=torch.float64)
    vec = {f"vec{i}": torch.rand(n, generator=g, dtype=torch.float64) + 0.5 for i in range(4)}
    vec["vec1_col"] = torch.rand(m, generator=g, dtype=torch.float64) + 0.5
    vec["vec4"] = torch.rand(1, generator=g, dtype=torch.float64) + 0.5

    def run(tree, vectors):
        leaf = ref_gemm.epilogue_leaves(acc, bias, residual, "test", vectors)
        return ref_gemm.evaluate_epilogue(tree, activations, leaf)

    F = torch.nn.functional
    lin = acc + bias
    assert torch.allclose(run(LEAKY, {}), F.leaky_relu(lin * 2.0, 0.1))
    bn = F.relu((lin - vec["vec0"]) / torch.sqrt(vec["vec1"] + 1e-05) * vec["vec2"] + vec["vec3"])
    assert torch.allclose(run(BATCHNORM, vec), bn)
    mixed = F.softplus(vec["vec4"] * acc * vec["vec1_col"].reshape(m, 1), beta=2.0, threshold=10.0) + \
        F.hardtanh(residual, -0.5, 0.5)
    assert torch.allclose(run(MIXED, {"vec1": vec["vec1_col"], "vec4": vec["vec4"]}), mixed)
    assert torch.allclose(run(["sigmoid", ["pow", "acc", {"exponent": 3.0}]], {}), torch.sigmoid(acc ** 3))
    with pytest.raises(ValueError, match="reads vector slot vec3"):
        run(BATCHNORM, {k: vec[k] for k in ("vec0", "vec1", "vec2")})


def test_reference_op_takes_the_vectors_in_slot_order():
    torch = pytest.importorskip("torch")
    _, activations = tables()
    tree = ["add", ["mul", {"scalar": "vec4"}, "acc"], {"col": "vec1"}]
    schema, op, key = ref_gemm.reference_op({"op": "gemm_x", "epilogue": tree, "epilogue_tree": tree,
                                             "activations": activations})
    assert schema == ref_gemm.SCHEMA_WITH_VECTORS and schema.endswith("Tensor? residual, Tensor[] vectors, *, bool b_constant=False) -> Tensor")
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    col, scale = torch.randn(6), torch.tensor([3.0])
    out = op(a, b, None, None, [col, scale])
    assert torch.allclose(out, 3.0 * (a @ b) + col.reshape(2, 3, 1))
    with pytest.raises(ValueError, match="reads 2 vectors"):
        op(a, b, None, None, [col])
    plain = ref_gemm.reference_op({"op": "gemm_y", "epilogue": "bias"})
    assert plain[0] == ref_gemm.SCHEMA


def problem(tree, batch=2, dtype="float32", numerics="fp32"):
    return GemmProblem(m=24, n=40, k=56, batch=batch, layout_a="row", layout_b="col", dtype=dtype, numerics=numerics,
                       epilogue=tree)


def test_case_makes_every_slot_and_its_reference_and_baseline_read_them():
    torch = pytest.importorskip("torch")
    p = problem(["add", BATCHNORM, ["mul", {"scalar": "vec4"}, ["mul", {"col": "vec5"}, "residual"]]])
    assert p.vector_lengths == {"vec0": 40, "vec1": 40, "vec2": 40, "vec3": 40, "vec4": 1, "vec5": 48}
    assert p.bias_length == 40 and p.has_residual
    case = GemmCase(p)
    ops = case.make_inputs("cpu", torch.Generator().manual_seed(1))
    for slot, t in ops.vectors.items():
        assert t.shape == (p.vector_lengths[slot],) and float(t.min()) >= 0.5 and float(t.max()) <= 1.5
    assert all(any(t is v for t in case.input_tensors(ops)) for v in ops.vectors.values())
    assert case.bytes_per_set() == 4 * (2 * (24 * 56 + 56 * 40 + 24 * 40) + 40 + 2 * 24 * 40 + 4 * 40 + 1 + 48)
    v = {k: t.double() for k, t in ops.vectors.items()}
    lin = ops.a.double() @ ops.b.double() + ops.bias.double()
    bn = torch.relu((lin - v["vec0"]) / torch.sqrt(v["vec1"] + 1e-05) * v["vec2"] + v["vec3"])
    manual = bn + v["vec4"] * (v["vec5"].reshape(2, 24, 1) * ops.residual.double())
    ref = case.reference(ops)["d"]
    assert torch.allclose(ref, manual)
    assert verify.compare(torch_epilogue_gemm(p, ops), ref, case.tolerance()).passed
    # The unbatched baseline goes through addmm and shapes the column vector [M, 1].
    p1 = problem(["mul", LINEAR, {"col": "vec0"}], batch=1)
    case1 = GemmCase(p1)
    ops1 = case1.make_inputs("cpu")
    assert ops1.vectors["vec0"].shape == (24,)
    assert verify.compare(torch_epilogue_gemm(p1, ops1), case1.reference(ops1)["d"], case1.tolerance()).passed
    # The kernel arguments carry each slot's pointer at its index; the others stay null.
    args = case.kernel_args(ops, 0)
    assert args.vectors[0] == ops.vectors["vec0"].data_ptr() and args.vectors[5] == ops.vectors["vec5"].data_ptr()
    assert args.vectors[6] is None and args.vectors[7] is None
    assert ctypes.sizeof(args) == 264  # ABI version 8 (the tile scheduler's run-time knobs)


def test_case_without_vectors_keeps_its_inputs():
    pytest.importorskip("torch")
    case = GemmCase(problem("bias_relu"))
    ops = case.make_inputs("cpu")
    assert ops.vectors == {} and case.input_tensors(ops) == [ops.a_storage, ops.b_storage, ops.bias]
    assert all(v is None for v in case.kernel_args(ops, 0).vectors)
