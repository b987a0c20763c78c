"""CPU reference of an attention op (attn_<id>, templates/cute/attention_op.cpp.in) with the kernel ABI's semantics
(the "abi" doc of data/families/attention.json): softmax(scale Q K^T [causal] [+ mask]) V in float64, rounded once to
q's dtype; a query whose every key is masked gets 0, as PyTorch's math back-end's safe softmax gives."""
import torch

SCHEMA = "(Tensor q, Tensor k, Tensor v, Tensor? mask, float scale, bool causal) -> Tensor"


def masked_scores(s, mask):
    """Scores with SDPA's attn_mask applied: a bool mask keeps keys where it is true, a floating one adds."""
    if mask is None:
        return s
    if mask.dtype == torch.bool:
        return s.masked_fill(~mask, float("-inf"))
    return s + mask.to(s.dtype)


def safe_softmax(s):
    """Softmax over the keys, 0 for a row with no unmasked key (PyTorch's math back-end: _safe_softmax)."""
    p = torch.softmax(s, dim=-1)
    return p.masked_fill((s == float("-inf")).all(dim=-1, keepdim=True), 0.0)


def _attention(q, k, v, mask, scale, causal):
    # Grouped-query attention: K/V head j serves query heads j * group ... (j + 1) * group - 1.
    group = q.shape[1] // k.shape[1]
    kd, vd = (t.double().repeat_interleave(group, dim=1) for t in (k, v))
    s = torch.matmul(q.double(), kd.transpose(-2, -1)) * scale
    if causal:  # bottom-right aligned, as the kernel: key j is masked for query i when j > i + (seq_k - seq_q)
        seq_q, seq_k = q.shape[2], k.shape[2]
        i = torch.arange(seq_q).unsqueeze(1)
        j = torch.arange(seq_k).unsqueeze(0)
        s = s.masked_fill(j > i + (seq_k - seq_q), float("-inf"))
    o = torch.matmul(safe_softmax(masked_scores(s, mask)), vd).to(q.dtype)
    # As the op: the [B, H, T, D] view of a [B, T, H, D] tensor.
    return o.transpose(1, 2).contiguous().transpose(1, 2)


def reference_op(entry):
    """(schema, implementation, key) of an attention op's manifest entry (one op computes every attention)."""
    return SCHEMA, _attention, "attention"
