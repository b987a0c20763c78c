"""The CPU reference ops: one file per family (python/fact/compose/reference/<family>.py) for every family of the
registry (data/families), found by reference_ops.py by name with no list of its own, and runnable from a copy
of reference_ops.py and reference/ with PyTorch alone (as a composed folder ships them)."""
import os
import shutil
import subprocess
import sys

import pytest
import torch

from composed_module import WITHOUT_FACT
from conftest import PYTHON_DIR
from fact.compose import reference_ops
from fact.realize import family_cases


def manifest(*entries):
    return {"format": "fact-composed-module", "accepted": list(entries)}


def test_every_family_of_the_registry_has_a_reference_op_and_no_other():
    assert reference_ops.families() == sorted(family_cases.FAMILIES)
    for family in family_cases.FAMILIES:
        assert callable(reference_ops.family_reference(family).reference_op), family


def test_an_unknown_or_missing_family_is_an_error_naming_the_op():
    with pytest.raises(ValueError, match=r"op deconv_1: family 'deconv' has no reference op .*known: attention, conv, gemm"):
        reference_ops.register_reference_ops(manifest({"op": "deconv_1", "family": "deconv"}))
    with pytest.raises(ValueError, match=r"op conv_2: family '\.\./gemm' has no reference op"):
        reference_ops.register_reference_ops(manifest({"op": "conv_2", "family": "../gemm"}))
    with pytest.raises(ValueError, match="op gemm_nofamily: the manifest entry names no family"):
        reference_ops.register_reference_ops(manifest({"op": "gemm_nofamily", "epilogue": "none"}))


def test_a_kind_without_reference_is_an_error_naming_the_op():
    with pytest.raises(ValueError, match=r"op gemm_ref_bad: epilogue 'bias_tanh' has no reference implementation"):
        reference_ops.register_reference_ops(manifest({"op": "gemm_ref_bad", "family": "gemm", "epilogue": "bias_tanh"}))
    with pytest.raises(ValueError, match=r"op norm_ref_bad: normalization kind 'group_norm' has no reference"):
        reference_ops.register_reference_ops(
            manifest({"op": "norm_ref_bad", "family": "normalization", "config": {"kind": "group_norm"}}))
    with pytest.raises(ValueError, match=r"op rowwise_ref_bad: the rowwise config carries no fragment"):
        reference_ops.register_reference_ops(manifest({"op": "rowwise_ref_bad", "family": "rowwise", "config": {}}))


def test_an_op_registered_again_must_compute_the_same():
    relu = {"op": "gemm_ref_again", "family": "gemm", "epilogue": "bias_relu"}
    assert reference_ops.register_reference_ops(manifest(relu)) == ["gemm_ref_again"]
    assert reference_ops.register_reference_ops(manifest(relu)) == ["gemm_ref_again"]
    with pytest.raises(ValueError, match="op gemm_ref_again is already registered as 'gemm epilogue bias_relu', "
                                         "not 'gemm epilogue none'"):
        reference_ops.register_reference_ops(manifest({**relu, "epilogue": None}))
    norm = {"op": "norm_ref_again", "family": "normalization", "config": {"kind": "rms_norm"}}
    reference_ops.register_reference_ops(manifest(norm))
    with pytest.raises(ValueError, match="registered as 'normalization rms_norm', not 'normalization rms_norm \\+sum'"):
        reference_ops.register_reference_ops(manifest({**norm, "config": {"kind": "rms_norm", "store_sum": True}}))


# Run in a folder holding copies of reference_ops.py and reference/ only: `fact` must not be importable.
STANDALONE_CHECK = WITHOUT_FACT + """
import importlib.util, torch
# As model_new.py loads it: by path, the module not kept (the registrations must outlive it).
spec = importlib.util.spec_from_file_location("copied_reference_ops", "reference_ops.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
m = {"format": "fact-composed-module", "accepted": [
    {"op": "gemm_alone", "family": "gemm", "epilogue": "bias_silu_mul"},
    {"op": "norm_alone", "family": "normalization", "config": {"kind": "layer_norm", "store_sum": True}},
    {"op": "attn_alone", "family": "attention", "config": {}},
    {"op": "rope_alone", "family": "rope", "config": {}}]}
assert module.register_reference_ops(m) == [e["op"] for e in m["accepted"]]
del module, spec
import gc; gc.collect()
torch.manual_seed(0)
a, b, bias, u = torch.randn(4, 8), torch.randn(8, 6), torch.randn(6), torch.randn(4, 6)
f = torch.ops.fact
diffs = [(f.gemm_alone(a, b, bias, u) - torch.nn.functional.silu(a @ b + bias) * u).abs().max()]
x, r, w, bn = torch.randn(3, 16), torch.randn(3, 16), torch.randn(16), torch.randn(16)
y, s = f.norm_alone(x, r, w, bn, 1e-5)
diffs += [(y - torch.nn.functional.layer_norm(x + r, (16,), w, bn, 1e-5)).abs().max(), (s - (x + r)).abs().max()]
q, k, v = torch.randn(1, 4, 5, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
diffs.append((f.attn_alone(q, k, v, None, 8 ** -0.5, True) - want).abs().max())
pad = torch.arange(5)[None, None, None, :] < torch.tensor([3, 5])[:, None, None, None]  # [2, 1, 1, 5] padding
q2, k2, v2 = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8)
want = torch.nn.functional.scaled_dot_product_attention(q2, k2, v2, attn_mask=pad)
diffs.append((f.attn_alone(q2, k2, v2, pad, 8 ** -0.5, False) - want).abs().max())
cos, sin = torch.randn(5, 8), torch.randn(5, 8)
diffs.append((f.rope_alone(q, cos, sin) - (q * cos + torch.cat((-q[..., 4:], q[..., :4]), -1) * sin)).abs().max())
print("MAXDIFF", max(float(d) for d in diffs))
"""


def test_the_copied_reference_ops_run_with_pytorch_alone(tmp_path):
    source = PYTHON_DIR / "fact" / "compose"
    shutil.copy(source / "reference_ops.py", tmp_path)
    shutil.copytree(source / "reference", tmp_path / "reference", ignore=shutil.ignore_patterns("__pycache__"))
    # As `fact compose` does: the GEMM reference reads the predefined epilogue trees and activations from here.
    shutil.copytree(PYTHON_DIR.parent / "data" / "epilogues", tmp_path / "reference" / "epilogues")
    r = subprocess.run([sys.executable, "-c", STANDALONE_CHECK], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert r.returncode == 0, r.stderr
    assert float(r.stdout.split("MAXDIFF")[1]) < 1e-5


def test_rowwise_key_names_its_fragment():
    fragment = {"inputs": [{"broadcast": False}, {"broadcast": True}]}
    schema, _, key = reference_ops.family_reference("rowwise").reference_op(
        {"op": "rowwise_ref", "family": "rowwise", "config": {"fragment": fragment, "entry": "e", "source_hash": "h"}})
    assert schema == "(Tensor in0, Tensor in1) -> Tensor" and key == "rowwise e h"
