"""python/fact/attention_masks.py (CPU): an SDPA attn_mask built from constants and shapes alone is evaluated at trace
time and, where it is the causal mask, the call becomes is_causal=True without it (all-true: no mask), its builders
removed; a mask that reads a forward input or module state, or is any other constant, stays exactly as it was. The
rewritten program computes what the module computes."""
import json
import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from conftest import REPO_ROOT, hf_llama_file  # noqa: E402
from fact.attention_masks import fold_attention_masks  # noqa: E402
from fact.ir_encode import encode_program  # noqa: E402
from fact.problem import instantiate, load_problem  # noqa: E402
from fact.trace import trace  # noqa: E402

SDPA = torch.ops.aten.scaled_dot_product_attention.default
BERT_PADDING = REPO_ROOT / "bench" / "problems" / "level2" / "sdpa_padding_mask_bert.py"
# The ops transformers builds its causal mask from under torch.export (besides arange, which position ids share).
MASK_OPS = ("aten.cumsum.default", "aten.diff.default", "aten.le.Tensor", "aten.__and__.Tensor", "aten.index.Tensor",
            "aten.new_ones.default", "aten.eq.Tensor")


def traced(model_file, tmp_path) -> dict:
    trace(model_file, tmp_path / "ir.json", None)
    return json.loads((tmp_path / "ir.json").read_text())


def sdpa_entries(ir: dict) -> list[dict]:
    return [n for n in ir["nodes"] if n.get("op") == "aten.scaled_dot_product_attention.default"]


def test_hf_llama_traces_to_causal_sdpa_without_the_mask_or_its_builders(tmp_path):
    ir = traced(hf_llama_file(tmp_path, "bfloat16"), tmp_path)
    calls = sdpa_entries(ir)
    assert len(calls) == 2
    for call in calls:
        assert call["args"][3:] == [None, 0.0, True], call
        assert call["kwargs"] == {"scale": 0.25}, call
    ops = {n.get("op") for n in ir["nodes"]}
    assert not ops & set(MASK_OPS), ops & set(MASK_OPS)
    assert any(re.fullmatch(r"attn_mask \w+ of scaled_dot_product_attention, scaled_dot_product_attention_1 "
                            r"folded: causal \(.*\d+ ops that built it removed\)", note) for note in ir["notes"]), ir


@pytest.mark.parametrize("dtype, tol", [("float32", 1e-5), ("bfloat16", 2e-2)])
def test_hf_llama_program_with_the_rewrite_equals_the_model(dtype, tol, tmp_path):
    model_file = hf_llama_file(tmp_path, dtype)
    model, inputs, _ = instantiate(load_problem(model_file), "cpu")
    with torch.no_grad():
        want = model(*inputs)
        ep = torch.export.export(model, tuple(inputs))
        assert any(n.target is SDPA and len(n.args) > 3 and n.args[3] is not None for n in ep.graph.nodes)
        encoded = encode_program(ep)
        calls = [n for n in ep.graph.nodes if n.target is SDPA]
        assert calls and all(n.args[3:] == (None, 0.0, True) for n in calls), [n.args for n in calls]
        assert any("folded: causal" in note for note in encoded.notes), encoded.notes
        got = ep.module()(*inputs)
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, atol=tol, rtol=tol)


def test_a_users_padding_mask_stays(tmp_path):
    ir = traced(BERT_PADDING, tmp_path)
    (call,) = sdpa_entries(ir)
    assert call["args"] == [{"ref": "q"}, {"ref": "k"}, {"ref": "v"}, {"ref": "mask"}], call
    assert ir["notes"] == ["attn_mask mask of scaled_dot_product_attention kept: it reads the forward input mask"]


S = 12


def positions():
    i = torch.arange(S)
    return i[:, None], i[None, :]


class Masked(torch.nn.Module):
    """SDPA over q, k, v with the mask `make()` builds in forward."""

    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.make(q), scale=0.3)


class HandCausal(Masked):
    def make(self, q):
        i, j = positions()
        return (j <= i)[None, None].expand(q.shape[0], 1, S, S)


class AdditiveCausal(Masked):
    def make(self, q):
        return torch.full((S, S), float("-inf")).triu(1)


class AllTrue(Masked):
    def make(self, q):
        return torch.ones(q.shape[0], 1, S, S, dtype=torch.bool)


class SlidingWindow(Masked):
    """Causal within a window of 4 keys: constant, but not causal."""

    def make(self, q):
        i, j = positions()
        return (j <= i) & (j > i - 4)


class BufferCausal(Masked):
    """A causal mask kept as a buffer: module state someone may update, so it stays."""

    def __init__(self):
        super().__init__()
        self.register_buffer("causal", torch.ones(S, S, dtype=torch.bool).tril())

    def make(self, q):
        return self.causal


class MinDtypeAdditive(Masked):
    """Causal, but masked with the dtype's lowest number, not -inf: not bit for bit what is_causal computes."""

    def make(self, q):
        i, j = positions()
        return torch.where(j <= i, 0.0, torch.finfo(torch.float32).min)


class RandomMask(Masked):
    def make(self, q):
        return torch.rand(S, S) > 0.5


class Rectangular(torch.nn.Module):
    """8 queries over 12 keys, the bottom-right causal mask: PyTorch's is_causal is top-left aligned, so it stays."""

    def forward(self, q, k, v):
        i, j = torch.arange(8)[:, None], torch.arange(S)[None, :]
        return torch.nn.functional.scaled_dot_product_attention(q[:, :, :8], k, v, attn_mask=j <= i + (S - 8))


CASES = [
    (HandCausal, "causal", "folded: causal"),
    (AdditiveCausal, "causal", "folded: causal"),
    (AllTrue, "none", "folded: none"),
    (SlidingWindow, "kept", "neither causal nor keeps every score"),
    (BufferCausal, "kept", "it reads the buffer"),
    (MinDtypeAdditive, "kept", "neither causal nor keeps every score"),
    (RandomMask, "kept", "is not deterministic"),
    (Rectangular, "kept", "neither causal nor keeps every score"),
]


@pytest.mark.parametrize("module, outcome, note", CASES, ids=[c[0].__name__ for c in CASES])
def test_hand_written_masks_fold_only_when_causal_or_empty(module, outcome, note):
    torch.manual_seed(0)
    model = module().eval()
    inputs = tuple(torch.randn(2, 4, S, 16) for _ in range(3))
    ep = torch.export.export(model, inputs)
    before = [n.format_node() for n in ep.graph.nodes if n.target is SDPA]
    want = ep.module()(*inputs)  # the program as exported (RandomMask: its own draw, replayed below from the seed)
    notes = fold_attention_masks(ep)
    assert len(notes) == 1 and note in notes[0], notes
    (call,) = [n for n in ep.graph.nodes if n.target is SDPA]
    if outcome == "kept":
        assert [call.format_node()] == before
        return
    assert call.args[3:] == ((None, 0.0, True) if outcome == "causal" else ()), call.args
    assert call.kwargs == {"scale": 0.3}
    assert all(n.op in ("placeholder", "output") or n.target is SDPA for n in ep.graph.nodes), ep.graph
    torch.testing.assert_close(ep.module()(*inputs), want, atol=1e-6, rtol=1e-6)
