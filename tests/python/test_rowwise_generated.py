"""Generated row-wise problems (discover's rowwise_generated entries) on CPU: the case's shapes and the
float64 fragment replay against PyTorch's own ops."""
import pytest

torch = pytest.importorskip("torch")

from fact.agent.fragment_replay import replay  # noqa: E402
from fact.realize.rowwise_case import parse_problem  # noqa: E402


def _node(name, op, args, shape):
    return {"name": name, "op": op, "args": args, "kwargs": {}, "outputs": [{"shape": shape, "dtype": "float32"}]}


def _lse_fragment(rows=6, cols=10):
    # logsumexp -> mish -> mul, one value per row (KernelBench level2/22's tail).
    return {"format": "fact-rowwise-fragment", "version": 1, "output": "m2", "rows": rows, "cols": cols,
            "dtype": "float32", "full_shape": [rows, cols], "trailing_dims": 1,
            "inputs": [{"name": "x", "shape": [rows, cols], "broadcast": False}],
            "nodes": [_node("lse", "aten.logsumexp.default", [{"ref": "x"}, [1], True], [rows, 1]),
                      _node("mi", "aten.mish.default", [{"ref": "lse"}], [rows, 1]),
                      _node("m2", "aten.mul.Tensor", [{"ref": "lse"}, {"ref": "mi"}], [rows, 1])]}


def test_generated_problem_parses_and_shapes_per_row_outputs():
    f = _lse_fragment()
    p = parse_problem({"entry": "", "generated": True, "rows": 6, "cols": 10, "dtype": "float32",
                       "numerics": "fp32", "fragment": f})
    assert p.generated and p.output_per_row() and p.out_elements() == 6
    odd = parse_problem({**p.to_json(), "rows": 37})
    assert odd.input_shape(f["inputs"][0]) == (37, 10)
    with pytest.raises(Exception, match="entry"):
        parse_problem({"entry": "", "rows": 6, "cols": 10, "dtype": "float32", "numerics": "fp32", "fragment": f})


def test_fragment_replay_equals_pytorch_on_cpu():
    x = torch.randn(6, 10, dtype=torch.float64)
    lse = torch.logsumexp(x, 1, keepdim=True)
    want = lse * torch.nn.functional.mish(lse)
    assert torch.allclose(replay(_lse_fragment(), [x]), want)


def _gelu_chain(rows=8, cols=64):
    return {"format": "fact-rowwise-fragment", "version": 1, "output": "g", "rows": rows, "cols": cols,
            "dtype": "float32", "full_shape": [2, rows // 2, cols], "trailing_dims": 1,
            "inputs": [{"name": "x", "shape": [2, rows // 2, cols], "broadcast": False}],
            "nodes": [_node("m", "aten.mul.Tensor", [{"ref": "x"}, 0.5], [2, rows // 2, cols]),
                      _node("g", "aten.gelu.default", [{"ref": "m"}], [2, rows // 2, cols])]}


def test_case_inputs_reference_and_variants_on_cpu():
    from fact.realize.rowwise_case import ODD_COLS, ODD_ROWS, RowwiseCase
    lse = RowwiseCase(parse_problem({"entry": "", "generated": True, "rows": 6, "cols": 10, "dtype": "float32",
                                     "numerics": "fp32", "fragment": _lse_fragment()}))
    inp = lse.make_inputs("cpu")
    assert tuple(inp.outputs["out"][0].shape) == (6, 1)  # one value per row
    assert tuple(lse.reference(inp)["out"].shape) == (6, 1)
    assert [v.rows for v in lse.verify_variants()] == [ODD_ROWS]  # a reduction's row length is fixed

    flat = RowwiseCase(parse_problem({"entry": "", "generated": True, "any_cols": True, "rows": 8, "cols": 64,
                                      "dtype": "float32", "numerics": "fp32", "fragment": _gelu_chain()}))
    odd = flat.verify_variants()[-1]
    assert (odd.rows, odd.cols) == (ODD_ROWS, ODD_COLS) and odd.rows * odd.cols % 2 == 1
    v = RowwiseCase(odd)
    vin = v.make_inputs("cpu")
    assert tuple(vin.inputs[0].shape) == (1, ODD_ROWS, ODD_COLS)  # rank kept: the fragment's dims still apply
    ref = v.reference(vin)["out"]
    want = torch.nn.functional.gelu(vin.inputs[0].double() * 0.5).reshape(ODD_ROWS, ODD_COLS)
    assert torch.allclose(ref, want)


KERNELBENCH = __import__("pathlib").Path("/work/shared/kernelbench")
FACT_BIN = __import__("pathlib").Path(__file__).resolve().parents[2] / "build" / "fact"


@pytest.mark.parametrize("problem,anchor,reduction_after_gemm", [
    ("level1/19_ReLU.py", "relu", False), ("level1/23_Softmax.py", "softmax", False),
    ("level1/88_MinGPTNewGelu.py", "mul_3", False), ("level2/99_Matmul_GELU_Softmax.py", "softmax", True),
    ("level1/94_MSELoss.py", "pow_1", False), ("level1/100_HingeLoss.py", "clamp", False),
    ("level1/36_RMSNorm_.py", "div", False), ("level1/39_L2Norm_.py", "div", False)])
def test_fact_discover_shows_generated_rowwise_entries(problem, anchor, reduction_after_gemm, tmp_path):
    import json
    import subprocess
    if not (KERNELBENCH / problem).is_file():
        pytest.skip(f"KernelBench not at {KERNELBENCH}")
    if not FACT_BIN.is_file():
        pytest.skip(f"fact binary not built at {FACT_BIN}")
    plan_path = tmp_path / "plan.json"
    r = subprocess.run([str(FACT_BIN), "discover", str(KERNELBENCH / problem), "--json", str(plan_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    plan = json.loads(plan_path.read_text())
    gen = [p for p in plan["patterns"] if p["rule"] == "rowwise_generated"]
    assert [p["anchor"] for p in gen] == [anchor]
    assert gen[0]["kernel"]["kind"] == "ir" and gen[0]["kernel"]["fragment"]["format"] == "fact-rowwise-fragment"
    assert any("reduction after gemm" in n for n in plan["notes"]) == reduction_after_gemm


def test_reference_in_row_slices_equals_one_replay(monkeypatch):
    """A large problem's float64 reference is replayed over slices of rows; the result is the one replay's."""
    import torch

    from fact.realize import rowwise_case
    frag = {"format": "fact-rowwise-fragment", "version": 1, "output": "sm", "rows": 10, "cols": 6, "dtype": "float32",
            "full_shape": [10, 6], "trailing_dims": 1,
            "inputs": [{"name": "x", "shape": [10, 6], "broadcast": False}, {"name": "w", "shape": [6], "broadcast": True}],
            "nodes": [{"name": "m", "op": "aten.mul.Tensor", "args": [{"ref": "x"}, {"ref": "w"}], "kwargs": {},
                       "outputs": [{"shape": [10, 6], "dtype": "float32"}]},
                      {"name": "sm", "op": "aten._softmax.default", "args": [{"ref": "m"}, -1, False], "kwargs": {},
                       "outputs": [{"shape": [10, 6], "dtype": "float32"}]}]}
    case = rowwise_case.RowwiseCase.__new__(rowwise_case.RowwiseCase)
    case.problem = rowwise_case.RowwiseProblem(entry="", rows=10, cols=6, dtype="float32", numerics="fp32", fragment=frag)
    inp = rowwise_case.RowwiseInputs([torch.randn(10, 6), torch.randn(6)], {})
    whole = case.reference(inp)["out"]
    monkeypatch.setattr(rowwise_case, "REFERENCE_CHUNK", 18)  # 3 rows per slice, the last slice 1 row
    sliced = case.reference(inp)["out"]
    assert torch.equal(whole, sliced)
    assert torch.allclose(whole, torch.softmax(inp.inputs[0].double() * inp.inputs[1].double(), -1))


def test_compare_in_chunks_finds_the_worst_element(monkeypatch):
    import torch

    from fact.realize import verify
    monkeypatch.setattr(verify, "COMPARE_CHUNK", 7)
    ref = torch.randn(5, 9, dtype=torch.float64)
    out = ref.float().clone()
    assert verify.compare(out, ref, 1e-6).passed
    out[3, 4] += 1.0
    bad = verify.compare(out, ref, 1e-6)
    assert not bad.passed and "at [3, 4]" in bad.message
    out[3, 4] = float("nan")
    assert "not written (still NaN), first at [3, 4]" in verify.compare(out, ref, 1e-6).message
    out[3, 4] = float("inf")
    assert "+-inf" in verify.compare(out, ref, 1e-6).message


def _rms_over_channels(n=4, c=8, h=3, w=5):
    # x / sqrt(mean(x ** 2, dim=1, keepdim) + eps) over [N, C, H, W] (KernelBench level1/36): rows of C elements,
    # H*W apart.
    full, per_row = [n, c, h, w], [n, 1, h, w]
    return {"format": "fact-rowwise-fragment", "version": 1, "output": "y", "rows": n * h * w, "cols": c,
            "dtype": "float32", "full_shape": full, "trailing_dims": 1, "inner_dims": 2, "inner": h * w,
            "inputs": [{"name": "x", "shape": full, "broadcast": False}],
            "nodes": [_node("p", "aten.pow.Tensor_Scalar", [{"ref": "x"}, 2], full),
                      _node("m", "aten.mean.dim", [{"ref": "p"}, [1], True], per_row),
                      _node("a", "aten.add.Tensor", [{"ref": "m"}, 1e-5], per_row),
                      _node("s", "aten.sqrt.default", [{"ref": "a"}], per_row),
                      _node("y", "aten.div.Tensor", [{"ref": "x"}, {"ref": "s"}], full)]}


def test_strided_rows_shape_their_inputs_variants_and_reference_on_cpu(monkeypatch):
    from fact.realize import rowwise_case
    from fact.realize.rowwise_case import ODD_OUTER, RowwiseCase
    f = _rms_over_channels()
    p = parse_problem({"entry": "", "generated": True, "rows": 60, "cols": 8, "dtype": "float32", "numerics": "fp32",
                       "fragment": f})
    assert p.inner() == 15 and not p.output_per_row()
    with pytest.raises(Exception, match="inner"):  # rows must be whole blocks of 15
        parse_problem({**p.to_json(), "rows": 61})
    case = RowwiseCase(p)
    [odd] = case.verify_variants()
    assert odd.rows == ODD_OUTER * 15 and odd.input_shape(f["inputs"][0]) == (ODD_OUTER, 8, 3, 5)
    inp = case.make_inputs("cpu")
    x = inp.inputs[0].double()
    want = x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)
    ref = case.reference(inp)["out"]
    assert tuple(ref.shape) == (60, 8)  # the kernel's output buffer: the full tensor's memory, rows x cols
    assert torch.allclose(ref.reshape(4, 8, 3, 5), want)
    monkeypatch.setattr(rowwise_case, "REFERENCE_CHUNK", 8 * 15)  # one block of N per slice
    assert torch.equal(case.reference(inp)["out"], ref)


def test_a_per_channel_row_is_shared_by_strided_rows_on_cpu():
    # softmax over channels, then a [C, 1, 1] bias (KernelBench level2/91's tail): the bias is the rows' shared row.
    n, c, h, w = 2, 8, 3, 5
    full = [n, c, h, w]
    f = {"format": "fact-rowwise-fragment", "version": 1, "output": "a", "rows": n * h * w, "cols": c,
         "dtype": "float32", "full_shape": full, "trailing_dims": 1, "inner_dims": 2, "inner": h * w,
         "inputs": [{"name": "x", "shape": full, "broadcast": False}, {"name": "b", "shape": [c, 1, 1], "broadcast": True}],
         "nodes": [_node("s", "aten.softmax.int", [{"ref": "x"}, 1], full),
                   _node("a", "aten.add.Tensor", [{"ref": "s"}, {"ref": "b"}], full)]}
    from fact.realize.rowwise_case import RowwiseCase
    case = RowwiseCase(parse_problem({"entry": "", "generated": True, "rows": n * h * w, "cols": c, "dtype": "float32",
                                      "numerics": "fp32", "fragment": f}))
    inp = case.make_inputs("cpu")
    assert tuple(inp.inputs[1].shape) == (c, 1, 1)
    assert case.kernel_args(inp, 0).input_row_stride[1] == 0
    x, b = inp.inputs[0].double(), inp.inputs[1].double()
    assert torch.allclose(case.reference(inp)["out"].reshape(full), torch.softmax(x, 1) + b)


def test_instance_norm_fragment_replays_as_pytorch_on_cpu():
    full = [2, 8, 6, 10]
    f = {"format": "fact-rowwise-fragment", "version": 1, "output": "n", "rows": 16, "cols": 60, "dtype": "float32",
         "full_shape": full, "trailing_dims": 2, "inputs": [{"name": "x", "shape": full, "broadcast": False}],
         "nodes": [_node("n", "aten.instance_norm.default", [{"ref": "x"}, None, None, None, None, True, 0.1, 1e-5, False],
                         full)]}
    x = torch.randn(*full, dtype=torch.float64)
    assert torch.allclose(replay(f, [x]), torch.nn.functional.instance_norm(x))


def _group_norm_then(tail, extra_inputs=(), n=4, c=8, h=3, w=5, g=4):
    """GroupNorm(g groups) over [n, c, h, w] (weight wt, bias b, per channel), then the node `tail` reads node "gn":
    the fragment and its problem."""
    full = [n, c, h, w]
    chan = {"channels": c, "inner": h * w}
    f = {"format": "fact-rowwise-fragment", "version": 1, "output": tail["name"], "rows": n * g,
         "cols": c // g * h * w, "dtype": "float32", "full_shape": full, "trailing_dims": 3, "groups": g,
         "inputs": [{"name": "x", "shape": full, "broadcast": False},
                    {"name": "wt", "shape": [c], "broadcast": True, "channel": chan},
                    {"name": "b", "shape": [c], "broadcast": True, "channel": chan}, *extra_inputs],
         "nodes": [_node("gn", "aten.group_norm.default", [{"ref": "x"}, g, {"ref": "wt"}, {"ref": "b"}, 1e-5, False], full),
                   tail]}
    return f, parse_problem({"entry": "", "generated": True, "rows": n * g, "cols": c // g * h * w, "dtype": "float32",
                             "numerics": "fp32", "fragment": f})


def test_group_norm_rows_are_groups_and_its_weights_are_channel_inputs_on_cpu(monkeypatch):
    # GroupNorm(4 groups of 2 channels) over [N, 8, 3, 5], then hardtanh (KernelBench level2/30's tail on 4-D): a row is
    # one sample's group (2 channels' planes), weight and bias are read per channel.
    from fact.realize import rowwise_case
    from fact.realize.rowwise_case import ODD_OUTER, RowwiseCase
    n, c, h, w, g = 4, 8, 3, 5, 4
    full = [n, c, h, w]
    f, p = _group_norm_then(_node("t", "aten.hardtanh.default", [{"ref": "gn"}], full))
    assert p.block() == g and not p.output_per_row()
    with pytest.raises(Exception, match="groups"):  # rows must be whole samples
        parse_problem({**p.to_json(), "rows": n * g + 1})
    case = RowwiseCase(p)
    [odd] = case.verify_variants()
    assert odd.rows == ODD_OUTER * g and odd.input_shape(f["inputs"][0]) == (ODD_OUTER, c, h, w)
    assert odd.input_shape(f["inputs"][1]) == (c,)
    inp = case.make_inputs("cpu")
    args = case.kernel_args(inp, 0)
    assert args.input_row_stride[1] == 0 and args.input_row_stride[2] == 0
    x, wt, b = (t.double() for t in inp.inputs)
    want = torch.nn.functional.hardtanh(torch.nn.functional.group_norm(x, g, wt, b, 1e-5))
    ref = case.reference(inp)["out"]
    assert tuple(ref.shape) == (n * g, c // g * h * w)
    assert torch.allclose(ref.reshape(full), want)
    monkeypatch.setattr(rowwise_case, "REFERENCE_CHUNK", c * h * w)  # one sample per slice: weights stay whole
    assert torch.equal(case.reference(inp)["out"], ref)


def test_a_zero_dim_input_is_one_value_for_every_element_on_cpu():
    # KernelBench level2/83's tail: group_norm, then torch.min with a 0-d tensor (an input of one channel).
    from fact.realize.rowwise_case import RowwiseCase
    n, c, h, w, g = 4, 8, 3, 5, 4
    full = [n, c, h, w]
    _, p = _group_norm_then(_node("m", "aten.min.other", [{"ref": "gn"}, {"ref": "k"}], full),
                            [{"name": "k", "shape": [], "broadcast": True, "channel": {"channels": 1, "inner": h * w}}])
    case = RowwiseCase(p)
    inp = case.make_inputs("cpu")
    x, wt, b, k = (t.double() for t in inp.inputs)
    assert k.shape == ()
    want = torch.min(torch.nn.functional.group_norm(x, g, wt, b, 1e-5), k)
    assert torch.allclose(case.reference(inp)["out"].reshape(full), want)


def test_a_fragment_reading_log_is_verified_on_positive_inputs():
    # KL divergence terms log(p) * t: random normal draws would make NaN on both sides, which the verifier reads as
    # elements the kernel never wrote.
    from fact.realize.rowwise_case import RowwiseCase, reads_positive_domain
    f = _gelu_chain()
    assert not reads_positive_domain(f)
    f["nodes"][0] = _node("m", "aten.log.default", [{"ref": "x"}], f["full_shape"])
    assert reads_positive_domain(f)
    case = RowwiseCase(parse_problem({"entry": "", "generated": True, "rows": 8, "cols": 64, "dtype": "float32",
                                      "numerics": "fp32", "fragment": f}))
    inp = case.make_inputs("cpu")
    assert bool((inp.inputs[0] > 0).all())
    assert bool(torch.isfinite(case.reference(inp)["out"]).all())


def test_an_instance_norm_with_a_channel_multiplier_keeps_whole_samples_in_its_variants():
    # instance_norm, clamp, then * a [C, 1, 1, 1] multiplier (KernelBench level2/79's tail): the odd-row variant must
    # keep the 16 channels the multiplier broadcasts over (37 rows made [1, 37, ...] and the replay failed).
    from fact.realize.rowwise_case import ODD_OUTER, RowwiseCase
    n, c, d, h, w = 2, 16, 3, 4, 5
    full = [n, c, d, h, w]
    chan = {"channels": c, "inner": d * h * w}
    f = {"format": "fact-rowwise-fragment", "version": 1, "output": "m", "rows": n * c, "cols": d * h * w,
         "dtype": "float32", "full_shape": full, "trailing_dims": 3,
         "inputs": [{"name": "x", "shape": full, "broadcast": False},
                    {"name": "k", "shape": [c, 1, 1, 1], "broadcast": True, "channel": chan}],
         "nodes": [_node("i", "aten.instance_norm.default",
                         [{"ref": "x"}, None, None, None, None, True, 0.1, 1e-5, False], full),
                   _node("m", "aten.mul.Tensor", [{"ref": "i"}, {"ref": "k"}], full)]}
    p = parse_problem({"entry": "", "generated": True, "rows": n * c, "cols": d * h * w, "dtype": "float32",
                       "numerics": "fp32", "fragment": f})
    assert p.block() == c
    case = RowwiseCase(p)
    [odd] = case.verify_variants()
    assert odd.rows == ODD_OUTER * c and odd.input_shape(f["inputs"][0]) == (ODD_OUTER, c, d, h, w)
    odd_case = RowwiseCase(odd)
    inp = odd_case.make_inputs("cpu")
    x, k = (t.double() for t in inp.inputs)
    want = torch.nn.functional.instance_norm(x) * k
    assert torch.allclose(odd_case.reference(inp)["out"].reshape(ODD_OUTER, c, d, h, w), want)


def _avg_pool_then_softmax(n=2, c=4, h=7, w=9):
    # avg_pool2d 3x3, stride 2, padding 1, without the padding in the divisor, then softmax over the channels: the
    # pool's input (window) is bigger than the fragment's full tensor, its output.
    oh, ow = (h + 2 - 3) // 2 + 1, (w + 2 - 3) // 2 + 1
    full = [n, c, oh, ow]
    return {"format": "fact-rowwise-fragment", "version": 1, "output": "s", "rows": n * oh * ow, "cols": c,
            "dtype": "float32", "full_shape": full, "trailing_dims": 1, "inner_dims": 2, "inner": oh * ow,
            "inputs": [{"name": "x", "shape": [n, c, h, w], "broadcast": True, "window": True}],
            "nodes": [_node("p", "aten.avg_pool2d.default", [{"ref": "x"}, [3, 3], [2, 2], [1, 1], False, False], full),
                      _node("s", "aten.softmax.int", [{"ref": "p"}, 1], full)]}


def test_a_pools_input_keeps_its_pooled_dims_and_is_sliced_by_samples_on_cpu(monkeypatch):
    from fact.agent.fragment_replay import bytes_moved
    from fact.realize import rowwise_case
    from fact.realize.rowwise_case import ODD_OUTER, RowwiseCase
    f = _avg_pool_then_softmax()
    p = parse_problem({"entry": "", "generated": True, "rows": 40, "cols": 4, "dtype": "float32", "numerics": "fp32",
                       "fragment": f})
    assert p.block() == 20 and p.input_shape(f["inputs"][0]) == (2, 4, 7, 9)
    case = RowwiseCase(p)
    [odd] = case.verify_variants()  # an odd count of samples; the pooled dims as generated
    assert odd.rows == ODD_OUTER * 20 and odd.input_shape(f["inputs"][0]) == (ODD_OUTER, 4, 7, 9)
    # Read once (the pool's whole input) and written once (the full tensor).
    assert bytes_moved(f, 40, 4) == (2 * 4 * 7 * 9 + 40 * 4) * 4
    inp = case.make_inputs("cpu")
    x = inp.inputs[0].double()
    want = torch.softmax(torch.nn.functional.avg_pool2d(x, 3, 2, 1, count_include_pad=False), 1)
    ref = case.reference(inp)["out"]
    assert tuple(ref.shape) == (40, 4)
    assert torch.allclose(ref.reshape(2, 4, 4, 5), want)
    monkeypatch.setattr(rowwise_case, "REFERENCE_CHUNK", 4 * 7 * 9)  # one sample per slice
    # The same values; PyTorch's CPU pool may round the last bit differently on a batch of one.
    assert torch.allclose(case.reference(inp)["out"], ref, rtol=0, atol=1e-15)


def test_a_sum_over_dims_of_extent_one_replays_on_its_inputs_dims_on_cpu():
    """KernelBench level2/42's tail: sum over dims [2, 3] of a [16, 1, 1, 1] value (as many elements as its [16, 1]
    result), times 10: the fragment's full shape is the input's, so its dims index the reduction."""
    from fact.realize.rowwise_case import RowwiseCase
    f = {"format": "fact-rowwise-fragment", "version": 1, "output": "mul", "rows": 16, "cols": 1, "dtype": "float32",
         "full_shape": [16, 1, 1, 1], "trailing_dims": 2,
         "inputs": [{"name": "lse", "shape": [16, 1, 1, 1], "broadcast": False}],
         "nodes": [{"name": "s", "op": "aten.sum.dim_IntList", "args": [{"ref": "lse"}, [2, 3]], "kwargs": {},
                    "outputs": [{"dtype": "float32", "shape": [16, 1]}]},
                   {"name": "mul", "op": "aten.mul.Tensor", "args": [{"ref": "s"}, 10.0], "kwargs": {},
                    "outputs": [{"dtype": "float32", "shape": [16, 1]}]}]}
    case = RowwiseCase(parse_problem({"entry": "", "generated": True, "rows": 16, "cols": 1, "dtype": "float32",
                                      "numerics": "fp32", "fragment": f}))
    inp = case.make_inputs("cpu")
    ref = case.reference(inp)["out"]
    assert torch.allclose(ref.reshape(16), inp.inputs[0].double().reshape(16) * 10.0)
    (_, run), = case.baselines()[:1]
    assert torch.allclose(run(inp)["out"].double().reshape(16), ref.reshape(16))


def test_a_scan_with_a_bool_mask_input_is_verified_on_a_mask_on_cpu():
    # KernelBench level1/93's cumsum(x * mask), small: the mask input is drawn as a bool tensor (about half set), its
    # bytes counted as one each, and the float64 reference keeps it bool.
    from fact.realize.rowwise_case import RowwiseCase
    rows, cols = 8, 64
    full = [rows, cols]
    f = {"format": "fact-rowwise-fragment", "version": 1, "output": "c", "rows": rows, "cols": cols,
         "dtype": "float32", "full_shape": full, "trailing_dims": 1,
         "inputs": [{"name": "x", "shape": full, "broadcast": False},
                    {"name": "m", "shape": full, "broadcast": False, "dtype": "bool"}],
         "nodes": [_node("p", "aten.mul.Tensor", [{"ref": "x"}, {"ref": "m"}], full),
                   _node("c", "aten.cumsum.default", [{"ref": "p"}, 1], full)]}
    case = RowwiseCase(parse_problem({"entry": "", "generated": True, "rows": rows, "cols": cols, "dtype": "float32",
                                      "numerics": "fp32", "fragment": f}))
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(0))
    x, m = inp.inputs
    assert m.dtype == torch.bool and 0.2 < m.float().mean() < 0.8
    assert case.bytes_per_set() == (2 * 4 + 1) * rows * cols  # x and the output, 4 bytes an element; the mask 1
    ref = case.reference(inp)["out"]
    assert ref.dtype == torch.float64
    assert torch.allclose(ref, torch.cumsum(x.double() * m, 1))


def test_a_batch_norm_is_verified_on_a_positive_running_variance_on_cpu():
    # DenseNet's BN + ReLU in eval: the four [C] vectors are channel inputs; the one read as the running variance is
    # drawn positive (a negative variance would make NaN on both sides), and the reference is PyTorch's batch_norm.
    from fact.realize.rowwise_case import RowwiseCase, positive_inputs
    n, c, h, w = 2, 8, 3, 4
    full = [n, c, h, w]
    vec = {"shape": [c], "broadcast": True, "channel": {"channels": c, "inner": h * w}}
    f = {"format": "fact-rowwise-fragment", "version": 1, "output": "r", "rows": n * c * h, "cols": w,
         "dtype": "float32", "full_shape": full, "trailing_dims": 1,
         "inputs": [{"name": "x", "shape": full, "broadcast": False}] + [{"name": v, **vec} for v in "wbmv"],
         "nodes": [_node("bn", "aten.batch_norm.default", [{"ref": "x"}, {"ref": "w"}, {"ref": "b"}, {"ref": "m"},
                                                          {"ref": "v"}, False, 0.1, 1e-5, True], full),
                   _node("r", "aten.relu.default", [{"ref": "bn"}], full)]}
    assert positive_inputs(f) == {"v"}
    case = RowwiseCase(parse_problem({"entry": "", "generated": True, "rows": n * c * h, "cols": w, "dtype": "float32",
                                      "numerics": "fp32", "fragment": f}))
    for seed in range(3):
        inp = case.make_inputs("cpu", torch.Generator().manual_seed(seed))
        x, wt, b, m, v = (t.double() for t in inp.inputs)
        assert bool((v > 0).all()) and not bool((m > 0).all())
        want = torch.relu(torch.nn.functional.batch_norm(x, m, v, wt, b, False, 0.1, 1e-5))
        assert torch.allclose(case.reference(inp)["out"].reshape(full), want)


def _cross_entropy_fragment(rows=6, cols=10):
    # cross_entropy(x, t) as FACT's tracer decomposes it (KernelBench level1/95): the generated kernel's part, one value
    # per row: where(t != -100, -gather(log_softmax(x), 1, where(t != -100, t, 0)[:, None]).squeeze(1), 0).
    def node(name, op, args, shape, dtype="float32"):
        return {**_node(name, op, args, shape), "outputs": [{"shape": shape, "dtype": dtype}]}
    return {"format": "fact-rowwise-fragment", "version": 1, "output": "w", "rows": rows, "cols": cols,
            "dtype": "float32", "full_shape": [rows, cols], "trailing_dims": 1,
            "inputs": [{"name": "x", "shape": [rows, cols], "broadcast": False},
                       {"name": "t", "shape": [rows, 1], "broadcast": True, "per_row": True, "dtype": "int64"},
                       {"name": "keep", "shape": [rows], "broadcast": True, "per_row": True, "dtype": "bool"}],
            "nodes": [node("lsm", "aten._log_softmax.default", [{"ref": "x"}, 1, False], [rows, cols]),
                      node("g", "aten.gather.default", [{"ref": "lsm"}, 1, {"ref": "t"}], [rows, 1]),
                      node("s", "aten.squeeze.dim", [{"ref": "g"}, 1], [rows]),
                      node("n", "aten.neg.default", [{"ref": "s"}], [rows]),
                      node("w", "aten.where.ScalarOther", [{"ref": "keep"}, {"ref": "n"}, 0], [rows])]}


def test_cross_entropy_case_draws_indices_in_the_row_and_per_row_inputs_at_any_row_count():
    """The index input is drawn inside the row, per-row inputs follow the row count (the odd-rows variant), and the
    float64 reference is PyTorch's cross entropy per row (reduction='none') where the mask keeps the row."""
    from fact.agent.fragment_replay import bytes_moved
    from fact.realize.rowwise_case import ODD_ROWS, RowwiseCase
    f = _cross_entropy_fragment()
    case = RowwiseCase(parse_problem({"entry": "", "generated": True, "rows": 6, "cols": 10, "dtype": "float32",
                                      "numerics": "fp32", "fragment": f}))
    odd = RowwiseCase(case.problem.__class__(**{**case.problem.__dict__, "rows": ODD_ROWS}))
    for c, rows in ((case, 6), (odd, ODD_ROWS)):
        inp = c.make_inputs("cpu", torch.Generator().manual_seed(0))
        x, t, keep = inp.inputs
        assert tuple(t.shape) == (rows, 1) and t.dtype == torch.int64 and int(t.min()) >= 0 and int(t.max()) < 10
        assert tuple(keep.shape) == (rows,) and keep.dtype == torch.bool
        assert tuple(inp.outputs["out"][0].shape) == (rows, 1)
        ref = c.reference(inp)["out"].reshape(rows)
        want = torch.nn.functional.cross_entropy(x.double(), t.reshape(rows), reduction="none") * keep
        assert ref.dtype == torch.float64 and torch.allclose(ref, want)
    # Traffic: x once, 8 bytes of index and 1 of mask a row, one float a row out.
    assert bytes_moved(f, 6, 4) == 6 * 10 * 4 + 6 * 8 + 6 * 1 + 6 * 10 * 4


def test_an_exclusive_scan_padded_by_its_kernel_is_verified_on_padded_rows_and_row_views_on_cpu():
    """KernelBench level1/92's cat(zeros, cumsum(narrow(x))) as the generated pass writes it: the scan's fragment ends in
    constant_pad_nd, the output's rows are one column longer than the scan's, and a kernel taking row views is also
    verified on inputs that are a wider tensor's rows (a stride apart, 16-byte aligned)."""
    from fact.realize.rowwise_case import ODD_ROWS, ROW_VIEW_STEP, RowwiseCase
    rows, cols = 8, 63
    f = {"format": "fact-rowwise-fragment", "version": 1, "output": "cat", "rows": rows, "cols": cols,
         "dtype": "float32", "full_shape": [rows, cols], "trailing_dims": 1,
         "inputs": [{"name": "narrow", "shape": [rows, cols], "broadcast": False}],
         "nodes": [_node("cumsum", "aten.cumsum.default", [{"ref": "narrow"}, 1], [rows, cols]),
                   _node("cat", "aten.constant_pad_nd.default", [{"ref": "cumsum"}, [1, 0], 0], [rows, cols + 1])]}
    case = RowwiseCase(parse_problem({"entry": "", "generated": True, "takes_row_views": True, "rows": rows,
                                      "cols": cols, "dtype": "float32", "numerics": "fp32", "fragment": f}))
    assert case.problem.out_cols() == cols + 1 and case.problem.out_elements() == rows * (cols + 1)
    assert case.bytes_per_set() == 4 * rows * cols + 4 * rows * (cols + 1)
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(0))
    assert tuple(inp.outputs["out"][0].shape) == (rows, cols + 1)
    assert case.kernel_args(inp, 0).output_row_stride == cols + 1
    x = torch.randn(rows, cols + 1, dtype=torch.float64)
    want = torch.cat((torch.zeros(rows, 1, dtype=torch.float64), torch.cumsum(x.narrow(1, 0, cols), 1)), 1)
    assert torch.equal(replay(f, [x.narrow(1, 0, cols)]), want)
    odd, view = case.verify_variants()
    assert odd.rows == ODD_ROWS and not odd.as_row_views
    assert view.rows == ODD_ROWS and view.as_row_views
    vcase = RowwiseCase(view)
    vin = vcase.make_inputs("cpu", torch.Generator().manual_seed(1))
    t = vin.inputs[0]
    assert tuple(t.shape) == (ODD_ROWS, cols) and not t.is_contiguous() and t.stride(0) % ROW_VIEW_STEP == 0
    assert vcase.kernel_args(vin, 0).input_row_stride[0] == t.stride(0) > cols
    ref = vcase.reference(vin)["out"]
    assert torch.allclose(ref[:, 1:], torch.cumsum(t.double(), 1)) and bool((ref[:, 0] == 0).all())
    assert vcase.verify_variants() == []  # a variant has none of its own
