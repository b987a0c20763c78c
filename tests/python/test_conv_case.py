"""The conv family's Python side (issue 17): its measurement case (problem parsing, inputs in both layouts, the
float64 reference, PyTorch's way as a module runs it) and its CPU reference op, checked against PyTorch on the CPU."""
import pytest
import torch
import torch.nn.functional as F

from fact.compose.reference import conv as conv_reference
from fact.realize import family_cases
from fact.realize.problem_fields import ProblemError

# Conv2d_ReLU_BiasAdd, small: x [2, 8, 10, 10], w [16, 8, 3, 3] + bias, relu, + a [16, 1, 1] vector; what the
# C++ family's measure_problem writes for it.
TREE = ["add", ["relu", ["add", ["mul", "alpha", "acc"], {"row": "bias"}]], {"row": "vec0"}]
PROBLEM = {"spatial_dims": 2, "n": 2, "c": 8, "k": 16, "in": [1, 10, 10], "filter": [1, 3, 3], "out": [1, 8, 8],
           "stride": [1, 1, 1], "padding": [0, 0, 0], "dilation": [1, 1, 1], "transposed": False,
           "output_padding": [0, 0, 0], "groups": 1, "dtype": "float32", "numerics": "tf32", "epilogue": TREE}
# ConvTranspose2d, small: x [2, 8, 5, 5], w [8, 16, 3, 3] ([c, k, ...]), stride 2, padding 1, output_padding 1
# -> [2, 16, 10, 10], + bias, relu.
TRANSPOSED = {**PROBLEM, "in": [1, 5, 5], "out": [1, 10, 10], "stride": [1, 2, 2], "padding": [0, 1, 1],
              "transposed": True, "output_padding": [0, 1, 1], "epilogue": ["relu", ["add", ["mul", "alpha", "acc"],
                                                                                      {"row": "bias"}]]}


def test_problem_parses_and_checks_the_output_extent():
    p = family_cases.parse_family_problem("conv", PROBLEM, "x")
    assert p.out_shape == (2, 16, 8, 8) and p.reduction == 72 and p.numerics == "tf32"
    assert p.to_json() == PROBLEM
    with pytest.raises(ProblemError, match="x.out: .* does not follow"):
        family_cases.parse_family_problem("conv", {**PROBLEM, "out": [1, 9, 9]}, "x")
    with pytest.raises(ProblemError, match="fp32 convolutions run TF32"):
        family_cases.parse_family_problem("conv", {**PROBLEM, "numerics": "bf16"}, "x")
    assert family_cases.parse_family_problem("conv", {**TRANSPOSED, "numerics": "3xtf32"}, "x").numerics == "3xtf32"
    with pytest.raises(ProblemError, match="no C and no column vectors"):
        family_cases.parse_family_problem("conv", {**PROBLEM, "epilogue": "bias"}, "x")


def test_case_reference_and_baseline_agree_on_the_cpu():
    p = family_cases.parse_family_problem("conv", PROBLEM, "x")
    case = family_cases.case_for("conv", p)
    g = torch.Generator().manual_seed(0)
    inp = case.make_inputs("cpu", g)
    assert inp.x.is_contiguous() and inp.outputs["out"][0].is_contiguous(), "channels-first, as the module's"
    assert torch.isnan(inp.w_last).all(), "filled only by the pre-kernel step"
    case.pre_kernel()(inp)
    assert torch.equal(inp.w_last, inp.w) and inp.w_last.permute(0, 2, 3, 1).is_contiguous(), "channels-last filter"
    ref = case.reference(inp)["out"]
    want = F.conv2d(inp.x.double(), inp.w.double(), inp.bias.double()).relu() + inp.vectors["vec0"].double().reshape(-1, 1, 1)
    assert torch.allclose(ref, want)
    (name, run), = case.baselines()
    assert "TF32 allowed" in name
    got = run(inp)["out"]
    assert (got.double() - ref).norm() / ref.norm() < case.tolerance()
    args = case.kernel_args(inp, 0)
    assert (args.n, args.c, args.k) == (2, 8, 16) and list(args.out_extent) == [1, 8, 8]
    assert args.x == inp.x.data_ptr() and args.w == inp.w_last.data_ptr()
    assert args.vectors[0] == inp.vectors["vec0"].data_ptr()
    assert args.vectors[1] is None


def test_a_3xtf32_problem_is_measured_against_cudnn_with_tf32_off(monkeypatch):
    p = family_cases.parse_family_problem("conv", {**PROBLEM, "numerics": "3xtf32"}, "x")
    assert p.numerics == "3xtf32" and p.to_json()["numerics"] == "3xtf32"
    case = family_cases.case_for("conv", p)
    tf32_case = family_cases.case_for("conv", family_cases.parse_family_problem("conv", PROBLEM, "x"))
    assert case.tolerance() < tf32_case.tolerance() / 10, "held to fp32-accurate error"
    seen = []
    real_flags = torch.backends.cudnn.flags

    def flags(**kw):
        seen.append(kw.get("allow_tf32"))
        return real_flags(**kw)

    monkeypatch.setattr(torch.backends.cudnn, "flags", flags)
    g = torch.Generator().manual_seed(0)
    inp = case.make_inputs("cpu", g)
    case.pre_kernel()(inp)
    (name, run), = case.baselines()
    assert "TF32 off" in name
    ref = case.reference(inp)["out"]
    got = run(inp)["out"]
    assert seen == [False], "cuDNN's TF32 off in the baseline's call"
    assert (got.double() - ref).norm() / ref.norm() < case.tolerance()


def test_reference_op_is_the_tree_over_the_convolution():
    entry = {"op": "conv_x", "config": {"epilogue": TREE}}
    schema, impl, key = conv_reference.reference_op(entry)
    assert schema.startswith("(Tensor x, Tensor w") and "relu" in key
    x, w, b, v = torch.randn(2, 8, 9, 9), torch.randn(16, 8, 3, 3), torch.randn(16), torch.randn(16)
    out = impl(x, w, b, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1, [v])
    want = F.conv2d(x, w, b, stride=2, padding=1).relu() + v.reshape(-1, 1, 1)
    assert out.shape == want.shape and torch.allclose(out, want, atol=1e-5)
    with pytest.raises(ValueError, match="reads 1 vectors"):
        impl(x, w, b, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [])
    wt = torch.randn(8, 16, 3, 3)  # transposed: [c, k, ...]
    out = impl(x, wt, b, None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1, [v])
    want = F.conv_transpose2d(x, wt, b, stride=2, padding=1, output_padding=1).relu() + v.reshape(-1, 1, 1)
    assert out.shape == want.shape == (2, 16, 18, 18) and torch.allclose(out, want, atol=1e-5)
    wg = torch.randn(16, 2, 3, 3)  # 4 groups of 2 input channels
    out = impl(x, wg, b, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 4, [v])
    want = F.conv2d(x, wg, b, padding=1, groups=4).relu() + v.reshape(-1, 1, 1)
    assert out.shape == want.shape == (2, 16, 9, 9) and torch.allclose(out, want, atol=1e-5)


def test_the_reference_reductions_are_the_conv_familys_table():
    """The composed folder's reference (no fact package there) keeps its own copy of data/families/conv.json's
    "reductions", which the C++ growth and problem read: the two must be one table."""
    import json
    from pathlib import Path
    from fact.compose.reference.conv import REDUCTIONS
    data = json.loads((Path(__file__).resolve().parents[2] / "data" / "families" / "conv.json").read_text())
    assert {over: tuple(ops) for over, ops in data["reductions"].items()} == REDUCTIONS


def test_a_reducing_problem_returns_each_images_pixel_means():
    """reduce "mean": the op returns the epilogue's values averaged over each image's pixels, [n, k], against the
    convolution, its epilogue and the mean on the CPU; its output buffer and kernel args are the [n, k] sums'."""
    for problem in (PROBLEM, TRANSPOSED):
        p = family_cases.parse_family_problem("conv", {**problem, "reduce": "mean", "reduce_over": "pixels"}, "x")
        assert p.result_shape == (2, 16) and p.out_shape[2:] != () and p.to_json()["reduce"] == "mean"
        case = family_cases.case_for("conv", p)
        g = torch.Generator().manual_seed(0)
        inp = case.make_inputs("cpu", g)
        assert inp.outputs["out"][0].shape == (2, 16)
        if case.pre_kernel():
            case.pre_kernel()(inp)
        ref = case.reference(inp)["out"]
        plain = family_cases.case_for("conv", family_cases.parse_family_problem("conv", problem, "x"))
        want = plain.reference(inp)["out"].mean(dim=(2, 3))
        assert ref.shape == (2, 16) and torch.allclose(ref, want)
        (_, run), = case.baselines()
        assert (run(inp)["out"].double() - ref).norm() / ref.norm() < case.tolerance()
        assert list(case.kernel_args(inp, 0).out_extent) == list(p.out), "the kernel gets the conv's extents"
    summed = family_cases.parse_family_problem("conv", {**PROBLEM, "reduce": "sum", "reduce_over": "pixels"}, "x")
    assert "reduce" not in family_cases.parse_family_problem("conv", PROBLEM, "x").to_json()
    case = family_cases.case_for("conv", summed)
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(1))
    want = family_cases.case_for("conv", family_cases.parse_family_problem("conv", PROBLEM, "x")).reference(inp)["out"]
    assert torch.allclose(case.reference(inp)["out"], want.sum(dim=(2, 3)))
    with pytest.raises(ProblemError, match="reduce"):
        family_cases.parse_family_problem("conv", {**PROBLEM, "reduce": "max", "reduce_over": "pixels"}, "x")

    entry = {"op": "conv_x", "config": {"epilogue": TREE, "reduce": "mean", "reduce_over": "pixels"}}
    _, impl, key = conv_reference.reference_op(entry)
    assert key.endswith("-> mean over pixels")
    x, w, b, v = torch.randn(2, 8, 9, 9), torch.randn(16, 8, 3, 3), torch.randn(16), torch.randn(16)
    out = impl(x, w, b, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [v])
    want = (F.conv2d(x, w, b, padding=1).relu() + v.reshape(-1, 1, 1)).mean(dim=(2, 3))
    assert out.shape == (2, 16) and torch.allclose(out, want, atol=1e-5)


def test_a_channel_reduction_returns_each_pixels_minimum():
    """reduce "min" over "channels": [n, 1, ...], each pixel's minimum over the epilogue's channels (torch.amin over
    dim 1), forward and transposed, in the case's reference and baseline and in the composed module's reference op."""
    # (The transposed problem's relu makes most pixels' minimum 0: its maximum instead.)
    for problem, op in ((PROBLEM, "min"), (TRANSPOSED, "max")):
        p = family_cases.parse_family_problem("conv", {**problem, "reduce": op, "reduce_over": "channels"}, "x")
        assert p.result_shape == (2, 1, *p.out_shape[2:])
        case = family_cases.case_for("conv", p)
        inp = case.make_inputs("cpu", torch.Generator().manual_seed(2))
        assert inp.outputs["out"][0].shape == p.result_shape
        if case.pre_kernel():
            case.pre_kernel()(inp)
        plain = family_cases.case_for("conv", family_cases.parse_family_problem("conv", problem, "x"))
        ref = case.reference(inp)["out"]
        full = plain.reference(inp)["out"]
        assert torch.equal(ref, full.amin(dim=1, keepdim=True) if op == "min" else full.amax(dim=1, keepdim=True))
        (_, run), = case.baselines()
        assert (run(inp)["out"].double() - ref).norm() / ref.norm() < case.tolerance()
    entry = {"op": "conv_x", "config": {"epilogue": TREE, "reduce": "max", "reduce_over": "channels"}}
    _, impl, key = conv_reference.reference_op(entry)
    assert key.endswith("-> max over channels")
    x, w, b, v = torch.randn(2, 8, 9, 9), torch.randn(16, 8, 3, 3), torch.randn(16), torch.randn(16)
    out = impl(x, w, b, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [v])
    want = (F.conv2d(x, w, b, padding=1).relu() + v.reshape(-1, 1, 1)).amax(dim=1, keepdim=True)
    assert out.shape == (2, 1, 9, 9) and torch.allclose(out, want, atol=1e-5)
    with pytest.raises(ValueError, match="reduce 'max' over 'pixels'"):
        conv_reference.reference_op({"op": "c", "config": {"epilogue": TREE, "reduce": "max", "reduce_over": "pixels"}})


def test_reference_in_slices_of_the_batch_equals_the_whole(monkeypatch):
    from fact.realize import conv_case
    p = family_cases.parse_family_problem("conv", PROBLEM, "x")
    case = family_cases.case_for("conv", p)
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(1))
    whole = case.reference(inp)["out"]
    monkeypatch.setattr(conv_case, "REFERENCE_CHUNK_BYTES", 1)  # one image at a time
    monkeypatch.setattr(conv_case, "REFERENCE_F64_BYTES", 1)    # and stored in float32
    sliced = case.reference(inp)["out"]
    assert whole.dtype == torch.float64 and sliced.dtype == torch.float32
    assert torch.allclose(sliced.double(), whole, rtol=1e-6, atol=1e-6)


def test_image_channels_are_padded_to_whole_vectors_in_the_kernels_filter():
    """A 3-channel image: the kernel reads the filter channels-last with 4 channels (TMA's 16-byte vectors), the 4th
    zero, as the op wrapper pads it; the pre-kernel copy fills the first three."""
    p = family_cases.parse_family_problem("conv", {**PROBLEM, "c": 3}, "x")
    case = family_cases.case_for("conv", p)
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(0))
    assert inp.w_last.shape == inp.w.shape == (16, 3, 3, 3)
    storage = torch.as_strided(inp.w_last, (16, 3, 3, 4), (36, 12, 4, 1))
    assert torch.equal(storage[..., 3], torch.zeros(16, 3, 3)), "the padded channel is zero"
    assert torch.isnan(storage[..., :3]).all()
    case.pre_kernel()(inp)
    assert torch.equal(inp.w_last, inp.w) and torch.equal(storage[..., 3], torch.zeros(16, 3, 3))
    assert case.kernel_args(inp, 0).w == inp.w_last.data_ptr() and inp.w_last.stride() == (36, 1, 12, 4)


def test_transposed_problem_reads_w_as_pytorch_holds_it():
    """A transposed convolution: w [c, k, ...] handed to the kernel as it is (no pre-kernel copy: the kernel gathers
    each output phase's sub-filter), the reference and the baseline PyTorch's conv_transpose2d."""
    p = family_cases.parse_family_problem("conv", TRANSPOSED, "x")
    assert p.out_shape == (2, 16, 10, 10) and p.reduction == 8 * 2 * 2 and p.to_json() == TRANSPOSED
    with pytest.raises(ProblemError, match="does not follow"):
        family_cases.parse_family_problem("conv", {**TRANSPOSED, "output_padding": [0, 0, 0]}, "x")
    with pytest.raises(ProblemError, match="output_padding: .* on a forward convolution"):
        family_cases.parse_family_problem("conv", {**TRANSPOSED, "transposed": False}, "x")
    with pytest.raises(ProblemError, match="reads no residual"):
        family_cases.parse_family_problem("conv", {**TRANSPOSED, "epilogue": ["add", "acc", "residual"]}, "x")
    case = family_cases.case_for("conv", p)
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(0))
    assert inp.w.shape == (8, 16, 3, 3) and inp.w_last is inp.w and case.pre_kernel() is None
    ref = case.reference(inp)["out"]
    want = F.conv_transpose2d(inp.x.double(), inp.w.double(), inp.bias.double(), stride=2, padding=1,
                              output_padding=1).relu()
    assert ref.shape == (2, 16, 10, 10) and torch.allclose(ref, want)
    (name, run), = case.baselines()
    got = run(inp)["out"]
    assert (got.double() - ref).norm() / ref.norm() < case.tolerance()
    args = case.kernel_args(inp, 0)
    assert args.transposed == 1 and (args.c, args.k) == (8, 16) and args.w == inp.w.data_ptr()
    assert list(args.out_extent) == [1, 10, 10] and list(args.stride) == [1, 2, 2]


def test_depthwise_problem_runs_fp32_and_reads_w_as_pytorch_holds_it():
    """A depthwise convolution (groups == c, two outputs a channel): the direct kernel's, fp32 FMAs (no TF32 to
    match), w [k, 1, ...] handed to it as it is, the reference and the baseline PyTorch's grouped conv2d."""
    depthwise = {**PROBLEM, "k": 16, "groups": 8, "numerics": "fp32", "padding": [0, 1, 1], "out": [1, 10, 10]}
    p = family_cases.parse_family_problem("conv", depthwise, "x")
    assert p.direct and p.w_shape == (16, 1, 3, 3) and p.reduction == 9 and p.to_json() == depthwise
    with pytest.raises(ProblemError, match="the direct kernel .* runs fp32 FMAs"):
        family_cases.parse_family_problem("conv", {**depthwise, "numerics": "tf32"}, "x")
    with pytest.raises(ProblemError, match="groups: 3 must divide c 8"):
        family_cases.parse_family_problem("conv", {**depthwise, "groups": 3}, "x")
    with pytest.raises(ProblemError, match="forward convolutions only"):
        family_cases.parse_family_problem("conv", {**TRANSPOSED, "groups": 2, "numerics": "fp32"}, "x")
    case = family_cases.case_for("conv", p)
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(0))
    assert inp.w_last is inp.w and case.pre_kernel() is None
    ref = case.reference(inp)["out"]
    want = F.conv2d(inp.x.double(), inp.w.double(), inp.bias.double(), padding=1, groups=8).relu() + \
        inp.vectors["vec0"].double().reshape(-1, 1, 1)
    assert ref.shape == (2, 16, 10, 10) and torch.allclose(ref, want)
    (name, run), = case.baselines()
    got = run(inp)["out"]
    assert (got.double() - ref).norm() / ref.norm() < case.tolerance()
    args = case.kernel_args(inp, 0)
    assert args.groups == 8 and args.transposed == 0 and args.w == inp.w.data_ptr()


def test_dense_direct_problem_runs_fp32_and_reads_w_as_pytorch_holds_it():
    """A dense convolution the C++ problem marks "direct" (an image's 3 channels into few): the direct kernel's like a
    grouped one, fp32 FMAs, w handed as it is, the reference PyTorch's conv in float64."""
    dense = {**PROBLEM, "c": 3, "direct": True, "numerics": "fp32"}
    p = family_cases.parse_family_problem("conv", dense, "x")
    assert p.direct and p.groups == 1 and p.w_shape == (p.k, 3, 3, 3) and p.to_json() == dense
    plain = family_cases.parse_family_problem("conv", {**PROBLEM, "c": 3}, "x")
    assert not plain.direct and "direct" not in plain.to_json()
    with pytest.raises(ProblemError, match="the direct kernel .* runs fp32 FMAs"):
        family_cases.parse_family_problem("conv", {**dense, "numerics": "tf32"}, "x")
    with pytest.raises(ProblemError, match="direct: .* groups 1"):
        family_cases.parse_family_problem("conv", {**dense, "c": 8, "groups": 2}, "x")
    case = family_cases.case_for("conv", p)
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(0))
    assert inp.w_last is inp.w and case.pre_kernel() is None and case.verify_variants() == []
    ref = case.reference(inp)["out"]
    want = F.conv2d(inp.x.double(), inp.w.double(), inp.bias.double() if inp.bias is not None else None)
    assert ref.shape == want.shape
    (name, run), = case.baselines()
    assert "TF32 allowed" in name, "against PyTorch's default convolution"
    args = case.kernel_args(inp, 0)
    assert args.groups == 1 and args.w == inp.w.data_ptr() and args.c == 3


def test_channels_last_variant_hands_the_kernel_channels_last_tensors():
    # With a residual: x [2, 8, 10, 10] (8 fp32 channels: whole 16-byte vectors), residual and out [2, 16, 8, 8].
    tree = ["add", ["mul", "alpha", "acc"], "residual"]
    p = family_cases.parse_family_problem("conv", {**PROBLEM, "epilogue": tree}, "x")
    case = family_cases.case_for("conv", p)
    (v,) = case.verify_variants()
    assert v.channels_last == 7 and v.to_json()["channels_last"] == 7 and "channels_last" not in p.to_json()
    variant = family_cases.case_for("conv", v)
    inp = variant.make_inputs("cpu", torch.Generator().manual_seed(0))
    for t in (inp.x, inp.residual, inp.outputs["out"][0]):
        assert t.permute(0, 2, 3, 1).is_contiguous() and not t.is_contiguous(), "channels-last memory, [n, c, h, w] view"
    out, buf = inp.outputs["out"]
    assert out.untyped_storage().data_ptr() == buf.untyped_storage().data_ptr(), "inside the guarded buffer"
    assert variant.kernel_args(inp, 0).channels_last == 7
    variant.pre_kernel()(inp)
    ref = variant.reference(inp)["out"]
    assert torch.allclose(ref, F.conv2d(inp.x.double(), inp.w.double()) + inp.residual.double())
    # 3 channels (not whole vectors): x stays channels-first (the kernel pads its own copy); a direct kernel has none.
    rgb = family_cases.parse_family_problem("conv", {**PROBLEM, "c": 3}, "x")
    assert [q.channels_last for q in family_cases.case_for("conv", rgb).verify_variants()] == [4]
    depthwise = family_cases.parse_family_problem(
        "conv", {**PROBLEM, "k": 8, "groups": 8, "numerics": "fp32", "epilogue": ["mul", "alpha", "acc"]}, "x")
    assert family_cases.case_for("conv", depthwise).verify_variants() == []


def test_the_channels_last_variant_is_timed_with_a_channels_last_filter(monkeypatch):
    # What a chain of FACT convolutions hands the kernel is timed too, against cuDNN on channels-last x and w (a
    # channels-last module's tensors); a transposed conv's filter stays as PyTorch holds it (its kernel reads it
    # dense); inputs past the cap are not timed twice.
    from fact.realize import conv_case
    p = family_cases.parse_family_problem("conv", PROBLEM, "x")
    case = family_cases.case_for("conv", p)
    (v,) = case.timed_variants()
    assert v.channels_last == 5 and v == case.verify_variants()[0]
    inp = family_cases.case_for("conv", v).make_inputs("cpu", torch.Generator().manual_seed(0))
    assert inp.w.permute(0, 2, 3, 1).is_contiguous() and not inp.w.is_contiguous()
    tp = family_cases.parse_family_problem("conv", TRANSPOSED, "x")
    (tv,) = family_cases.case_for("conv", tp).timed_variants()
    assert family_cases.case_for("conv", tv).make_inputs("cpu", torch.Generator().manual_seed(0)).w.is_contiguous()
    monkeypatch.setattr(conv_case, "TIMED_VARIANT_MAX_BYTES", case.bytes_per_set() - 1)
    assert case.timed_variants() == []


def test_a_problem_tuned_channels_last_verifies_and_times_the_modules_layout_too():
    # The C++ problem of a conv fed by a chain of convolutions says channels_last: true; the case hands the kernel
    # channels-last x, residual and output (the layout bits), and its other layout is the module's channels-first.
    tree = ["add", ["mul", "alpha", "acc"], "residual"]
    p = family_cases.parse_family_problem("conv", {**PROBLEM, "epilogue": tree, "channels_last": True}, "x")
    assert p.channels_last == 7 and p.to_json()["channels_last"] == 7
    case = family_cases.case_for("conv", p)
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(0))
    assert inp.x.permute(0, 2, 3, 1).is_contiguous() and case.kernel_args(inp, 0).channels_last == 7
    (v,) = case.verify_variants()
    assert v.channels_last == 0 and case.timed_variants() == [v]
    (name, _), = case.baselines()
    assert name.startswith("torch conv (cuDNN, channels-last, TF32")
    assert "channels-last" not in family_cases.case_for("conv", v).baselines()[0][0]
    assert family_cases.parse_family_problem("conv", {**PROBLEM, "channels_last": False}, "x").channels_last == 0
    assert family_cases.parse_family_problem("conv", {**PROBLEM, "channels_last": 5}, "x").channels_last == 5
    for bad in (9, "yes"):
        with pytest.raises(ProblemError, match="channels_last"):
            family_cases.parse_family_problem("conv", {**PROBLEM, "channels_last": bad}, "x")
    grouped = {**PROBLEM, "k": 8, "groups": 8, "numerics": "fp32", "epilogue": ["mul", "alpha", "acc"]}
    assert family_cases.parse_family_problem("conv", {**grouped, "channels_last": True}, "x").channels_last == 5, \
        "a grouped conv in a chain: its direct kernel takes channels-last x and out"


def test_a_depthwise_conv_in_a_chain_is_handed_channels_last_tensors_and_a_dense_filter():
    # MobileNet's depthwise convs between channels-last 1x1 convs: the direct kernel of an element a thread reads x and
    # writes out channels-last (any channel count: no TMA vectors), w dense as its op wrapper hands it; verified and
    # timed once more on the module's channels-first tensors.
    depthwise = {**PROBLEM, "k": 16, "groups": 8, "numerics": "fp32", "padding": [0, 1, 1], "out": [1, 10, 10],
                 "c": 8, "channels_last": True}
    p = family_cases.parse_family_problem("conv", depthwise, "x")
    assert p.direct and p.channels_last == 5
    case = family_cases.case_for("conv", p)
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(0))
    assert inp.x.permute(0, 2, 3, 1).is_contiguous() and not inp.x.is_contiguous()
    assert inp.w_last.is_contiguous() and torch.equal(inp.w_last, inp.w), "the kernel's filter dense, same values"
    out, _ = inp.outputs["out"]
    assert out.permute(0, 2, 3, 1).is_contiguous() and not out.is_contiguous()
    args = case.kernel_args(inp, 0)
    assert args.channels_last == 5 and args.w == inp.w_last.data_ptr() and args.x == inp.x.data_ptr()
    grouped = family_cases.case_for("conv", family_cases.parse_family_problem(
        "conv", {**depthwise, "groups": 4, "k": 8}, "x")).make_inputs("cpu", torch.Generator().manual_seed(0))
    assert grouped.w.permute(0, 2, 3, 1).is_contiguous() and not grouped.w.is_contiguous(), "cuDNN's: the module's"
    assert grouped.w_last.is_contiguous() and torch.equal(grouped.w_last, grouped.w), "the kernel's: dense"
    ref = case.reference(inp)["out"]
    want = F.conv2d(inp.x.double(), inp.w.double(), inp.bias.double(), padding=1, groups=8).relu() + \
        inp.vectors["vec0"].double().reshape(-1, 1, 1)
    assert torch.allclose(ref, want)
    (v,) = case.verify_variants()
    assert v.channels_last == 0 and case.timed_variants() == [v]
    odd = family_cases.parse_family_problem("conv", {**depthwise, "c": 6, "k": 12, "groups": 6}, "x")
    assert odd.channels_last == 5, "6 fp32 channels are no whole vectors, which only an implicit GEMM's x needs"
