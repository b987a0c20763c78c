"""The composer with non-GEMM family ops: the MiniGPT block (2 LayerNorms + written-out causal attention), the
Llama-3 block (an RMSNorm, an add + RMSNorm whose sum the closing residual reads, rotary embeddings of q and k,
SDPA with grouped-query K/V), the small Llama block (rotate_half by chunk; K/V repeated by repeat_interleave
before SDPA), all from bench/problems/, and a Hugging Face BERT layer fed a padding mask (bench/models/hf_bert.py:
SDPA with a bool attn_mask), at small sizes, are traced, planned, given a tune report in which the
normalization, attention and rope patterns (and the GEMMs) won, and composed. The composed forward must call
torch.ops.fact.norm_* / attn_* / rope_* with the matched tensors (attention: the module's q/k/v views, for GQA the
un-expanded K/V; rope: the transposed q/k views and the [T, D] tables) and, with the CPU reference ops, equal the
original module. The composed
folder, copied elsewhere, still runs without the fact package (FACT_REFERENCE_OPS=1)."""
import json
import math
import re

import pytest
import torch
from composed_module import (REPO_ROOT, assert_model_new_equals_model, fact, load_model_new, max_diff,
                             needs_fact_binary, report_accepting, run_copied)

from fact.compose.reference_ops import register_reference_ops

PROBLEMS = REPO_ROOT / "bench" / "problems" / "level3"
MODELS = REPO_ROOT / "bench" / "models"

pytestmark = needs_fact_binary

# The problems' size constants, made small (head dim 16 in both; Llama keeps 4 query heads per KV head).
SMALL = {
    "minigpt_block": {"BATCH, SEQ_LEN, N_EMBD, N_HEAD": "2, 16, 64, 4"},
    "llama3_block": {"BATCH, SEQ_LEN": "2, 16", "HIDDEN, N_HEADS, N_KV_HEADS, INTERMEDIATE": "128, 8, 2, 256"},
    "llama_block_small": {"BATCH, SEQ, HIDDEN, HEADS, KV_HEADS, INTERMEDIATE": "2, 16, 128, 8, 2, 256"},
    "hf_bert": {"BATCH, SEQ_LEN": "2, 16", "LAYERS, HIDDEN, HEADS, INTERMEDIATE": "1, 128, 8, 256"},
}
# The non-GEMM families each problem's plan holds (sorted).
FAMILIES = {
    "minigpt_block": ["attention", "normalization", "normalization"],
    "llama3_block": ["attention", "normalization", "normalization", "rope", "rope"],
    "llama_block_small": ["attention", "normalization", "normalization", "rope", "rope"],
    "hf_bert": ["attention", "normalization", "normalization", "normalization"],
}
def small_problem(name, folder):
    text = ((MODELS if name.startswith("hf_") else PROBLEMS) / f"{name}.py").read_text()
    for names, values in SMALL[name].items():
        text, n = re.subn(rf"^{re.escape(names)} = .*$", f"{names} = {values}", text, flags=re.M)
        assert n == 1, f"{name}.py has no line '{names} = ...'; update SMALL in this test"
    path = folder / f"{name}_small.py"
    path.write_text(text)
    return path


@pytest.fixture(scope="module", params=["minigpt_block", "llama3_block", "llama_block_small", "hf_bert"])
def composed(request, tmp_path_factory):
    work = tmp_path_factory.mktemp(request.param)
    model = small_problem(request.param, work)
    r = fact("discover", model, "--json", work / "plan.json")
    assert r.returncode == 0, r.stderr
    doc = json.loads((work / "plan.json").read_text())
    tag = {"minigpt_block": "minigpt", "llama3_block": "llama", "llama_block_small": "llamasmall",
           "hf_bert": "bert"}[request.param]
    report = report_accepting(doc, {"gemm", "normalization", "attention", "rope"}, tag)
    (work / "tune.json").write_text(json.dumps(report))
    r = fact("compose", work / "plan.json", work / "tune.json", "--model", model, "--out", work / "composed")
    assert r.returncode == 0, r.stderr
    return request.param, work, doc, report


def test_family_patterns_are_fact_calls_with_the_matched_inputs(composed):
    name, work, doc, _ = composed
    source = (work / "composed" / "model_new.py").read_text()
    manifest = json.loads((work / "composed" / "manifest.json").read_text())
    families = sorted(a["family"] for a in manifest["accepted"] if a["family"] != "gemm")
    assert families == FAMILIES[name], manifest["accepted"]
    # BERT's embedding sum is a generated row-wise kernel the report keeps in PyTorch (it only accepts the families).
    kept = ["rowwise_generated"] if name == "hf_bert" else []
    assert [r["pattern"] for r in manifest["rejected"]] == kept, manifest["rejected"]
    for a in manifest["accepted"]:
        if a["family"] != "gemm":
            assert a["config"]["family"] == a["family"] and f"torch.ops.fact.{a['op']}(" in source
    calls = re.findall(r"= torch\.ops\.fact\.(attn_\w+|norm_\w+|rope_\w+)\((.*)\)  #", source)
    assert len(calls) == len(FAMILIES[name]), source
    for op, args in calls:
        if op.startswith("attn_"):
            mask, scale, causal = args.split(", ")[3:]
            assert float(scale) == 1 / math.sqrt(16) and causal == str(name != "hf_bert"), args
            assert (mask == "None") == (name != "hf_bert"), args  # BERT's padding mask goes to the op
    if "rope" in FAMILIES[name]:
        # x * cos + rotate_half(x) * sin is one call on the transposed q/k view and the [T, D] tables; the tables'
        # [:T] slices stay (q and k share them); the rotation itself (slices or chunk, neg, cat) is gone.
        rope_calls = [args.split(", ") for op, args in calls if op.startswith("rope_")]
        assert len(rope_calls) == 2 and rope_calls[0][1:] == rope_calls[1][1:], rope_calls
        var_of = dict((node, var) for var, node in re.findall(r"^\s+(v\d+) = .*  # (\w+)$", source, flags=re.M))
        assert [c[0] for c in rope_calls] == [var_of["transpose"], var_of["transpose_1"]], rope_calls
        assert rope_calls[0][1:] == [var_of["slice_1"], var_of["slice_2"]], rope_calls
        for op in ("neg", "cat", "chunk"):
            assert f"torch.ops.aten.{op}." not in source, op
    if name == "minigpt_block":
        # The written-out attention and both LayerNorms (with weight, bias and eps) are gone from forward.
        for op in ("softmax", "masked_fill", "layer_norm", "matmul"):
            assert f"torch.ops.aten.{op}." not in source, op
        assert all(args.endswith(", 1e-05") for op, args in calls if op.startswith("norm_"))
        assert all(args.count("None") == 1 for op, args in calls if op.startswith("norm_"))  # no residual
    elif name == "hf_bert":
        # SDPA is gone; the mask it read is built by PyTorch's ops as in the module.
        assert "torch.ops.aten.scaled_dot_product_attention." not in source
        assert "torch.ops.aten.__and__." in source
    elif name == "llama_block_small":
        # K/V repeated by repeat_interleave are not looked through: the op reads the repeated heads (heads_kv = heads).
        assert "torch.ops.aten.scaled_dot_product_attention." not in source
        assert "torch.ops.aten.repeat_interleave." in source
        # RMSNorm: no bias; as in the Llama-3 block, the post-attention norm takes the residual add before it
        # and returns the sum, which the closing residual reads.
        norms = sorted(args.count("None") for op, args in calls if op.startswith("norm_"))
        assert norms == [1, 2], calls
        fused = re.search(r"(v\d+), (v\d+_sum) = torch\.ops\.fact\.norm_\w+\(", source)
        assert fused and fused.group(2) in source[fused.end():], source
    else:
        # SDPA and its K/V repeat (unsqueeze/expand/reshape) are gone: the op reads the 2 KV heads in place.
        for op in ("scaled_dot_product_attention", "expand", "rsqrt"):
            assert f"torch.ops.aten.{op}." not in source, op
        # RMSNorm: no bias. The input norm has no residual; the post-attention one takes the residual add
        # before it (add_rms_norm) and returns the sum too, which the closing residual add (here FACT's GEMM +
        # residual) reads.
        norms = sorted(args.count("None") for op, args in calls if op.startswith("norm_"))
        assert norms == [1, 2], calls
        fused = re.search(r"(v\d+), (v\d+_sum) = torch\.ops\.fact\.norm_\w+\(", source)
        # The GEMM's weight is module state: the op keeps its pre-pass copy (b_constant).
        assert fused and f"{fused.group(2)}.reshape(32, 128).contiguous(), b_constant=True)" in source[fused.end():], \
            source


def test_composed_with_reference_ops_equals_the_original(composed):
    _, work, _, _ = composed
    register_reference_ops(work / "composed" / "manifest.json")
    assert_model_new_equals_model(load_model_new(work / "composed"), atol=1e-5, rtol=1e-5)


def test_attention_reference_returns_the_strided_view_the_kernel_returns(composed):
    _, work, _, _ = composed
    names = register_reference_ops(work / "composed" / "manifest.json")
    attn = getattr(torch.ops.fact, [n for n in names if n.startswith("attn_")][0])
    q, k, v = torch.randn(2, 8, 5, 16), torch.randn(2, 2, 5, 16), torch.randn(2, 2, 5, 16)
    o = attn(q, k, v, None, 0.25, True)
    assert o.shape == (2, 8, 5, 16) and o.transpose(1, 2).is_contiguous()
    expected = torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1), is_causal=True, scale=0.25)
    torch.testing.assert_close(o, expected, atol=1e-5, rtol=1e-5)


def test_copied_folder_runs_without_fact_on_reference_ops(composed, tmp_path):
    _, work, _, _ = composed
    assert max_diff(run_copied(work / "composed", tmp_path, FACT_REFERENCE_OPS="1")) < 1e-5
    r = run_copied(work / "composed", tmp_path)
    assert r.returncode != 0 and "libfact_ops.so is not in" in r.stderr
