"""The measurement side of the non-GEMM kernel families (normalization, attention, rope): request parsing, and on
the CPU the cases' float64 replays against PyTorch's own ops (the baselines), inputs laid out like the module's
views, poisoned outputs, and the odd sequence-length variants (the ABI mirrors are checked in test_measure.py).
Running a kernel needs the GPU (bench/scripts/fused_ops_h100.sh)."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import torch  # noqa: E402

from fact.realize import verify  # noqa: E402
from fact.realize.attention_case import AttentionCase, parse_problem as parse_attention, restride  # noqa: E402
from fact.realize.measure_request import RequestError, parse_request  # noqa: E402
from fact.realize.norm_case import NormCase, parse_problem as parse_norm  # noqa: E402
from fact.realize.rope_case import RopeCase, parse_problem as parse_rope, rotate_half  # noqa: E402

NORM = {"kind": "layer_norm", "rows": 37, "cols": 96, "x_row_stride": 104, "has_weight": True, "has_bias": True,
        "has_residual": True, "residual_row_stride": 96, "store_sum": True, "eps": 1e-5, "dtype": "float32"}
ATTN = {"batch": 2, "heads": 4, "heads_kv": 2, "seq_q": 45, "seq_k": 45, "head_dim": 16, "causal": True,
        "scale": 0.25, "q_strides": [45 * 3 * 64, 16, 3 * 64], "k_strides": [2 * 45 * 16, 45 * 16, 16],
        "v_strides": [45 * 2 * 16, 16, 2 * 16], "numerics": "tf32"}


def test_requests_name_the_family_and_bad_fields():
    req = parse_request({"family": "normalization", "problem": NORM, "candidates": []})
    assert req.family == "normalization" and req.problem.numerics == "fp32"
    assert req.to_json()["family"] == "normalization"
    assert parse_request({"family": "attention", "problem": ATTN}).problem.dtype == "float32"
    with pytest.raises(RequestError, match="request.family"):
        parse_request({"family": "deconv", "problem": NORM})
    with pytest.raises(RequestError, match=r"request.problem.has_bias: RMSNorm"):
        parse_request({"family": "normalization", "problem": {**NORM, "kind": "rms_norm"}})
    with pytest.raises(RequestError, match=r"request.problem.numerics"):
        parse_request({"family": "attention", "problem": {**ATTN, "numerics": "fp32"}})
    with pytest.raises(RequestError, match=r"heads_kv"):
        parse_request({"family": "attention", "problem": {**ATTN, "heads_kv": 3}})
    # A request that names no family is a GEMM request, and is passed on to the worker as one.
    assert parse_request({"problem": {"m": 8, "n": 8, "k": 8, "dtype": "float32"}}).to_json()["family"] == "gemm"


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
def test_norm_reference_agrees_with_pytorch_and_catches_a_wrong_variance(kind):
    p = parse_norm({**NORM, "kind": kind, "has_bias": kind == "layer_norm"})
    case = NormCase(p)
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(0))
    assert inp.x.stride(0) == 104 and inp.x.shape == (37, 96)
    y, buf = inp.outputs["y"]
    assert torch.isnan(buf).all() and y.shape == (37, 96)
    ref = case.reference(inp)
    assert torch.allclose(ref["sum"], (inp.x + inp.residual).double())
    for name, fn in case.baselines():
        out = fn(inp)
        for key in ref:
            check = verify.compare(out[key], ref[key], case.tolerance())
            assert check.passed, (name, key, check.message)
    # A kernel that forgot the residual must fail the check.
    wrong = NormCase(parse_norm({**NORM, "kind": kind, "has_bias": kind == "layer_norm", "has_residual": False,
                                 "store_sum": False}))
    assert not verify.compare(wrong.reference(inp)["y"], ref["y"], case.tolerance()).passed
    args = case.kernel_args(inp, 0)
    assert (args.rows, args.cols, args.x_row_stride, args.y_row_stride) == (37, 96, 104, 96)
    assert args.sum == inp.outputs["sum"][0].data_ptr() and (args.bias is not None) == (kind == "layer_norm")


def test_norm_variant_checks_a_ragged_last_cta_with_both_outputs():
    p = parse_norm({**NORM, "rows": 4096, "kind": "rms_norm", "has_bias": False})
    (v,) = NormCase(p).verify_variants()
    assert v.rows == 37 and v.rows % 8 and v.store_sum and v.has_residual
    assert (v.cols, v.x_row_stride, v.residual_row_stride, v.kind) == (p.cols, p.x_row_stride, p.residual_row_stride,
                                                                      p.kind)
    case = NormCase(v)
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(2))
    assert set(inp.outputs) == {"y", "sum"} and inp.x.shape == (37, 96)
    assert NormCase(v).verify_variants() == []  # the variant is not varied again


def sdpa_float64(inp, **kwargs):
    """PyTorch's SDPA in float64 on ATTN's inputs (2 query heads per K/V head, repeated as the module does)."""
    return torch.nn.functional.scaled_dot_product_attention(
        inp.q.double(), inp.k.double().repeat_interleave(2, 1), inp.v.double().repeat_interleave(2, 1), scale=0.25,
        **kwargs)


def assert_baselines_match(case, inp, ref):
    ways = dict(case.baselines())
    for name in ("eager matmul-softmax-matmul", "sdpa math"):
        assert verify.compare(ways[name](inp)["o"], ref, case.tolerance()).passed, name


def test_attention_reference_matches_sdpa_and_the_layout_is_the_modules():
    p = parse_attention(ATTN)
    case = AttentionCase(p)
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(1))
    assert inp.q.stride() == (45 * 192, 16, 192, 1)          # a head of a qkv projection, read in place
    o, buf = inp.outputs["o"]
    assert o.shape == (2, 4, 45, 16) and o.transpose(1, 2).is_contiguous()  # [B, T, H, D] storage
    ref = case.reference(inp)["o"]
    assert torch.allclose(ref, sdpa_float64(inp, is_causal=True), atol=1e-12)
    assert_baselines_match(case, inp, ref)
    non_causal = AttentionCase(parse_attention({**ATTN, "causal": False})).reference(inp)["o"]
    assert not verify.compare(non_causal, ref, case.tolerance()).passed  # the mask matters
    args = case.kernel_args(inp, 0)
    assert (args.o_batch_stride, args.o_head_stride, args.o_row_stride) == (45 * 4 * 16, 16, 4 * 16)
    assert (args.heads, args.heads_kv, args.causal) == (4, 2, 1) and math.isclose(args.scale, 0.25)


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_attention_with_a_padding_mask_matches_sdpa_and_rows_with_no_key_give_zero(kind):
    # BERT's padding mask: one [seq_q, seq_k] mask per sample, shared by the heads (stride 0).
    p = parse_attention({**ATTN, "causal": False, "mask": kind, "mask_strides": [45 * 45, 0, 45]})
    case = AttentionCase(p)
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(3))
    assert inp.mask.shape == (2, 1, 45, 45) and inp.mask.stride() == (45 * 45, 0, 45, 1)  # as the module's
    assert inp.mask.dtype == (torch.bool if kind == "bool" else torch.float32)
    live = inp.mask if kind == "bool" else inp.mask > float("-inf")
    assert 0.4 < live.float().mean() < 0.75  # keys masked anywhere, and each sample's padded tail
    # The first quarter of the keys is attended as it is (a kernel's blocks with nothing to mask get checked too).
    assert live[..., :45 // 4].all() and (kind == "bool" or (inp.mask[..., :45 // 4] == 0).all())
    assert (~live[..., -1]).all(dim=-1).any()  # a sample whose last key no row sees: a tail the kernels skip
    ref = case.reference(inp)["o"]
    mask = inp.mask if kind == "bool" else inp.mask.double()
    assert torch.allclose(ref, sdpa_float64(inp, attn_mask=mask), atol=1e-12)
    assert_baselines_match(case, inp, ref)
    unmasked = case.reference(type(inp)(inp.q, inp.k, inp.v, inp.outputs))["o"]
    assert not verify.compare(unmasked, ref, case.tolerance()).passed  # the mask matters
    args = case.kernel_args(inp, 0)
    assert (args.mask_kind, args.mask_batch_stride, args.mask_head_stride, args.mask_row_stride) == (
        {"bool": 1, "additive": 2}[kind], 45 * 45, 0, 45)
    assert args.mask == inp.mask.data_ptr()
    assert p.to_json()["mask"] == kind and p.to_json()["mask_strides"] == [45 * 45, 0, 45]
    assert "mask" not in parse_attention(ATTN).to_json()  # as FACT's C++ writes a problem without a mask
    # A query whose every key is masked gets 0 (PyTorch's math back-end's safe softmax), not NaN.
    full = torch.zeros_like(inp.mask) if kind == "bool" else torch.full_like(inp.mask, float("-inf"))
    full = full.expand(2, 4, 45, 45)
    none_left = AttentionCase(p).reference(type(inp)(inp.q, inp.k, inp.v, inp.outputs, full))["o"]
    assert torch.equal(none_left, torch.zeros_like(none_left))
    # The odd-length variants keep the mask, dense at their extents, still shared by the heads.
    v = case.verify_variants()[0]
    assert v.mask == kind and v.mask_strides == (333 * 333, 0, 333)
    # Timed as models build it: a bool mask is each sample's padded tail alone (every row attends a prefix of
    # the keys), an additive one keeps its holes and biases.
    timed = case.make_timing_inputs("cpu").mask
    timed_live = timed if kind == "bool" else timed > float("-inf")
    prefix = (timed_live.int().diff(dim=-1) <= 0).all().item()
    assert prefix == (kind == "bool") and timed.shape == inp.mask.shape and timed.stride() == inp.mask.stride()


def test_attention_odd_length_variants_keep_the_view_construction():
    p = parse_attention({**ATTN, "seq_q": 512, "seq_k": 512, "q_strides": [512 * 2304, 96, 2304],
                         "k_strides": [512 * 2304, 96, 2304], "v_strides": [512 * 2304, 96, 2304],
                         "head_dim": 96, "heads": 8, "heads_kv": 8, "batch": 128})
    variants = AttentionCase(p).verify_variants()
    assert [v.seq_q for v in variants] == [333, 77]
    assert all(v.seq_q % 32 for v in variants)
    assert variants[0].q_strides == (333 * 2304, 96, 2304) and variants[0].batch == 2
    assert restride((8 * 512 * 96, 512 * 96, 96), (1, 8, 512), (1, 8, 77)) == (8 * 77 * 96, 77 * 96, 96)


# q of a [2, 45, 4 * 16] projection seen as [batch 2, heads 4, seq 45, head_dim 16], cos/sin [45, 16] tables.
ROPE = {"batch": 2, "heads": 4, "seq": 45, "head_dim": 16, "x_strides": [45 * 64, 16, 64],
        "cos_strides": [0, 0, 16], "sin_strides": [0, 0, 16], "out_strides": [45 * 64, 16, 64], "dtype": "float32"}


def test_rope_requests_and_bad_fields():
    req = parse_request({"family": "rope", "problem": ROPE, "candidates": []})
    assert req.family == "rope" and req.problem.numerics == "fp32" and req.problem.x_strides == (45 * 64, 16, 64)
    assert parse_request({"family": "rope", "problem": {**ROPE, "dtype": "bfloat16"}}).problem.numerics == "bf16"
    with pytest.raises(RequestError, match=r"request.problem.head_dim: 15 is odd"):
        parse_request({"family": "rope", "problem": {**ROPE, "head_dim": 15}})
    with pytest.raises(RequestError, match=r"request.problem.numerics"):
        parse_request({"family": "rope", "problem": {**ROPE, "numerics": "tf32"}})
    with pytest.raises(RequestError, match=r"request.problem.cos_strides"):
        parse_request({"family": "rope", "problem": {**ROPE, "cos_strides": [0, 16]}})


def fma_kernel_math(x, cos, sin):
    """The kernel's fp32 arithmetic on the CPU: fmaf(x_lo, c, -fl(x_hi * s)) and fmaf(x_hi, c, fl(x_lo * s)),
    each fma's exact sum taken in float64 (48-bit product plus a 24-bit term) and rounded once to fp32."""
    half = x.shape[-1] // 2
    lo, hi = x[..., :half].double(), x[..., half:].double()
    c, s = cos.expand_as(x).double(), sin.expand_as(x).double()
    lo_s = (hi * s[..., :half]).float().double()
    hi_s = (lo * s[..., half:]).float().double()
    return torch.cat(((lo * c[..., :half] - lo_s).float(), (hi * c[..., half:] + hi_s).float()), dim=-1)


def test_rope_reference_is_the_modules_expression_and_the_tolerance_holds_for_fp32_kernel_math():
    case = RopeCase(parse_rope(ROPE))
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(2))
    assert inp.x.stride() == (45 * 64, 16, 64, 1)                    # read in place through the transposed view
    assert inp.cos.stride() == (0, 0, 16, 1) and inp.sin.shape == (2, 4, 45, 16)
    assert not torch.allclose(inp.cos[..., :8], inp.cos[..., 8:])    # each half its own angle: a half mix-up shows
    assert torch.allclose(inp.cos.double() ** 2 + inp.sin.double() ** 2, torch.ones(1, dtype=torch.float64))
    out, buf = inp.outputs["out"]
    assert out.stride() == (45 * 64, 16, 64, 1) and torch.isnan(buf).all()
    ref = case.reference(inp)["out"]
    # The module's own code (llama3_block.py) in float64 on the [seq, D] tables.
    x, cos, sin = inp.x.double(), inp.cos[0, 0].double(), inp.sin[0, 0].double()
    assert torch.allclose(ref, x * cos + torch.cat((-x[..., 8:], x[..., :8]), dim=-1) * sin, atol=1e-15)
    (name, eager), = case.baselines()
    assert "eager" in name and verify.compare(eager(inp)["out"], ref, case.tolerance()).passed
    # The kernel's fp32 math stays under the analytic bound 2*sqrt(2)*2^-24, itself 6x under the tolerance.
    check = verify.compare(fma_kernel_math(inp.x, inp.cos, inp.sin), ref, case.tolerance())
    bound = 2 * math.sqrt(2) * 2.0 ** -24
    assert check.passed and check.rel_err <= bound and check.max_err_vs_peak <= bound, check
    assert case.tolerance() >= 5 * bound
    # Wrong kernels fail: math in bf16, the other rotation direction, interleaved (GPT-J) pairs.
    in_bf16 = (inp.x.bfloat16() * inp.cos.bfloat16() + rotate_half(inp.x.bfloat16()) * inp.sin.bfloat16()).float()
    backwards = inp.x * inp.cos - rotate_half(inp.x) * inp.sin
    pairs = torch.stack((-inp.x[..., 1::2], inp.x[..., ::2]), dim=-1).flatten(-2)
    for wrong in (in_bf16, backwards, inp.x * inp.cos + pairs * inp.sin):
        assert not verify.compare(wrong, ref, case.tolerance()).passed
    args = case.kernel_args(inp, 0)
    assert (args.batch, args.heads, args.seq, args.head_dim) == (2, 4, 45, 16)
    assert (args.x_batch_stride, args.x_head_stride, args.x_row_stride) == (45 * 64, 16, 64)
    assert (args.cos_batch_stride, args.cos_head_stride, args.cos_row_stride) == (0, 0, 16)
    assert args.out == out.data_ptr() and args.x == inp.x.data_ptr()


def test_rope_bf16_eager_meets_its_tolerance_and_odd_lengths_keep_the_views():
    p = parse_rope({**ROPE, "dtype": "bfloat16"})
    case = RopeCase(p)
    inp = case.make_inputs("cpu", torch.Generator().manual_seed(3))
    assert inp.x.dtype == torch.bfloat16
    (_, eager), = case.baselines()
    assert verify.compare(eager(inp)["out"].float(), case.reference(inp)["out"], case.tolerance()).passed
    llama = parse_rope({**ROPE, "batch": 2, "heads": 32, "seq": 2048, "head_dim": 128,
                        "x_strides": [2048 * 4096, 128, 4096], "cos_strides": [0, 0, 128], "sin_strides": [0, 0, 128],
                        "out_strides": [2048 * 4096, 128, 4096]})
    variants = RopeCase(llama).verify_variants()
    assert [v.seq for v in variants] == [1, 77, 333]
    v77 = variants[1]
    assert v77.x_strides == (77 * 4096, 128, 4096) and v77.out_strides == v77.x_strides
    assert v77.cos_strides == (0, 0, 128) and v77.batch == 2
    small = RopeCase(parse_rope({**ROPE, "seq": 77})).verify_variants()
    assert [v.seq for v in small] == [1, 333]  # the problem's own length is not verified twice
    one = RopeCase(variants[0]).make_inputs("cpu", torch.Generator().manual_seed(4))
    assert one.x.shape == (2, 32, 1, 128) and one.outputs["out"][0].shape == (2, 32, 1, 128)
