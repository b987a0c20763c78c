"""The attention family's measurement case: O = softmax(scale * Q K^T [causal] [+ mask]) V, forward, with Q/K/V
read in place through the strides of the module's views and O written as [batch, seq, heads, head_dim]
(returned as its transpose(1, 2) view, so the module's following transpose(1, 2).contiguous() is free). A mask
(SDPA's attn_mask: bool, or additive in q's dtype) is read through its strides, with size 1 where the module's
repeats (SDPA broadcasts it). Verification and timing draw it at random: a quarter of the keys masked anywhere, and
each sample's keys past a random length in [seq_k / 2, seq_k] (a padding mask's tail, which the kernels skip);
additive: normal values, -inf where masked.

Verified against the module's own attention math in float64 (grouped-query heads repeated as the
module repeats them), at the problem's shape and at odd sequence lengths that are no multiple of any
tile. Baseline: the fastest of PyTorch's scaled_dot_product_attention back-ends (flash, efficient,
cuDNN, math; each where it takes the dtype) and the eager matmul-softmax-matmul chain, all in the same
numerics (TF32 allowed for fp32 tensors in tf32 mode).
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, replace

from . import verify
from .kernel_abi import FactAttentionArgs
from .measure_case import MeasureCase
from .problem_fields import (JsonProblem, ProblemError, bhr_strides, check_keys, choice, flag, integer,
                             paired_choice, positive_number)

DTYPE_FOR_NUMERICS = {"tf32": "float32", "3xtf32": "float32", "bf16": "bfloat16", "fp16": "float16"}
PROBLEM_KEYS = ("batch", "heads", "heads_kv", "seq_q", "seq_k", "head_dim", "causal", "scale", "q_strides",
                "k_strides", "v_strides", "dtype", "numerics", "mask", "mask_strides")
MASK_KIND = {"none": 0, "bool": 1, "additive": 2}  # the ABI's mask_kind
# Relative Frobenius error and max|err|/max|ref| vs float64. tf32: Q, K and P rounded to 10-bit mantissas
# (about 1e-3 expected); bf16: P and O rounded to 8 bits (about 3e-3); fp16: 11 bits (about 1e-3). Each
# bound leaves 5-10x margin and still catches a wrong mask, scale or a missing softmax rescale (O(1e-1)).
# 3xtf32 promises fp32 accuracy (measured 1.8-3.2e-7 on the H100; PyTorch fp32 4-5e-7; TF32 would be ~4e-4).
TOLERANCE = {"tf32": 1e-2, "3xtf32": 2e-6, "bf16": 2e-2, "fp16": 1e-2}
ODD_SEQ = (333, 77)  # verified besides the problem's own lengths: no multiple of 32, 64 or 128


@dataclass(frozen=True)
class AttentionProblem(JsonProblem):
    batch: int
    heads: int
    heads_kv: int
    seq_q: int
    seq_k: int
    head_dim: int
    causal: bool
    scale: float
    q_strides: tuple   # element strides of [batch, heads, seq_q, head_dim] for batch, head, row
    k_strides: tuple   # of [batch, heads_kv, seq_k, head_dim]
    v_strides: tuple
    dtype: str
    numerics: str
    mask: str = "none"
    mask_strides: tuple = (0, 0, 0)  # [batch, head, row] of the mask broadcast to [B, H, Tq, Tk]; keys contiguous

    def to_json(self) -> dict:  # as FACT's C++ writes it: no mask fields without a mask
        j = super().to_json()
        if self.mask == "none":
            del j["mask"], j["mask_strides"]
        return j


def parse_problem(obj, where: str = "request.problem") -> AttentionProblem:
    check_keys(obj, PROBLEM_KEYS, where)
    numerics, dtype = paired_choice(obj, where, "numerics", DTYPE_FOR_NUMERICS, "dtype")
    causal = flag(obj, "causal", where)
    scale = positive_number(obj, "scale", where)
    ints = {k: integer(obj, k, where) for k in ("batch", "heads", "heads_kv", "seq_q", "seq_k", "head_dim")}
    views = {k: bhr_strides(obj, k, where) for k in ("q_strides", "k_strides", "v_strides")}
    mask = choice(obj, "mask", where, tuple(MASK_KIND), default="none")
    if mask != "none":
        views["mask_strides"] = bhr_strides(obj, "mask_strides", where)
    p = AttentionProblem(**ints, **views, causal=causal, scale=scale, dtype=dtype, numerics=numerics, mask=mask)
    if p.heads % p.heads_kv:
        raise ProblemError(f"{where}.heads_kv: {p.heads_kv} does not divide heads {p.heads}")
    if p.causal and p.seq_q != p.seq_k:
        raise ProblemError(f"{where}.causal: seq_q {p.seq_q} != seq_k {p.seq_k}; the module's mask alignment is "
                           "ambiguous there, so only self-attention is taken")
    return p


def restride(strides: tuple, old: tuple, new: tuple) -> tuple:
    """The strides a view of the same construction has at other extents (batch, heads, seq).

    Dims are taken innermost first; an outer dim that was packed over the inner one at a whole-number
    ratio (e.g. qkv's row stride 3C over C) keeps that ratio, so [B, T, 3C] split into heads stays that.
    """
    order = sorted(range(3), key=lambda i: (strides[i], i))
    out = list(strides)
    prev = None
    for i in order:
        if prev is not None:
            span_old = strides[prev] * old[prev]
            span_new = out[prev] * new[prev]
            if span_old > 0 and strides[i] % span_old == 0 and strides[i] >= span_old:
                out[i] = span_new * (strides[i] // span_old)
            else:
                out[i] = max(strides[i], span_new)
        prev = i
    return tuple(out)


@dataclass
class AttentionInputs:
    q: object        # [B, H, Tq, D] strided view
    k: object        # [B, Hkv, Tk, D]
    v: object
    outputs: dict    # {"o": ([B, H, Tq, D] view of a [B, Tq, H, D] buffer, guarded flat buffer)}
    mask: object = None  # [B or 1, H or 1, Tq or 1, Tk] (1 where it broadcasts, as the module gives it), or None


class AttentionCase(MeasureCase):
    family = "attention"
    args_type = FactAttentionArgs
    has_workspace = True  # a masked call's look at its mask

    def tolerance(self) -> float:
        return TOLERANCE[self.problem.numerics]

    def _extents(self, which: str) -> tuple:
        p = self.problem
        return (p.batch, p.heads, p.seq_q) if which == "q" else (p.batch, p.heads_kv, p.seq_k)

    def _storage_elems(self, which: str) -> int:
        p = self.problem
        if which == "mask":
            extents, inner = (p.batch, p.heads, p.seq_q), p.seq_k
        else:
            extents, inner = self._extents(which), p.head_dim
        s = getattr(p, f"{which}_strides")
        return 1 + sum((e - 1) * st for e, st in zip(extents, s)) + inner - 1

    def bytes_per_set(self) -> int:
        p = self.problem
        elem = {"float32": 4, "bfloat16": 2, "float16": 2}[p.dtype]
        n = sum(self._storage_elems(w) for w in "qkv") + p.batch * p.heads * p.seq_q * p.head_dim
        mask = 0 if p.mask == "none" else self._storage_elems("mask") * (1 if p.mask == "bool" else elem)
        return n * elem + mask

    def make_inputs(self, device, generator=None, holes: bool = True) -> AttentionInputs:
        """Random inputs; a mask masks each sample's keys past a random length in [seq_k / 2, seq_k] and, with
        holes, a quarter of the middle half of the keys (an additive one biases them too)."""
        import torch
        p = self.problem
        dt = verify.torch_dtype(p.dtype)

        def view(which):
            storage = torch.randn(self._storage_elems(which), device=device, generator=generator).to(dt)
            s = getattr(p, f"{which}_strides")
            return torch.as_strided(storage, self._extents(which) + (p.head_dim,), s + (1,))

        def mask():
            # The module's shape: 1 where the problem's stride is 0, so SDPA (the baselines) broadcasts it as there.
            shape = tuple(e if st else 1 for e, st in zip((p.batch, p.heads, p.seq_q), p.mask_strides)) + (p.seq_k,)
            lengths = torch.randint(max(1, p.seq_k // 2), p.seq_k + 1, (shape[0], 1, 1, 1), device=device,
                                    generator=generator)
            # Holes and biases only in the middle half of the keys: the keys before it (and after it, up to the
            # row's length) are attended as they are, so a kernel's key blocks with nothing to mask are checked
            # beside mixed and wholly masked ones.
            key = torch.arange(p.seq_k, device=device)
            window = (key >= p.seq_k // 4) & (key < 3 * p.seq_k // 4)
            holed = (torch.rand(shape, device=device, generator=generator) < 0.25) & window & holes
            dead = holed | (key >= lengths)
            values = ~dead if p.mask == "bool" else \
                (torch.randn(shape, device=device, generator=generator) * window).masked_fill(dead, float("-inf")).to(dt)
            storage = torch.zeros(self._storage_elems("mask"), device=device, dtype=values.dtype)
            own = torch.as_strided(storage, shape, p.mask_strides + (1,))
            own.copy_(values)
            return own

        g, n = verify.GUARD_ELEMENTS, p.batch * p.heads * p.seq_q * p.head_dim
        buf = torch.full((n + 2 * g,), float("nan"), device=device, dtype=dt)
        o = buf[g:g + n].view(p.batch, p.seq_q, p.heads, p.head_dim).transpose(1, 2)
        return AttentionInputs(view("q"), view("k"), view("v"), {"o": (o, buf)},
                               None if p.mask == "none" else mask())

    def make_timing_inputs(self, device) -> AttentionInputs:
        """A bool mask timed as models build one (Hugging Face's padding masks: each sample's padded tail), not with
        the verification's holes, which touch nearly every key block: a kernel skips the mask's work where a block
        is untouched, SDPA's back-ends do not. An additive mask (a bias over every key) stays as verified."""
        return self.make_inputs(device, holes=self.problem.mask != "bool")

    def input_tensors(self, inp: AttentionInputs) -> list:
        return [inp.q, inp.k, inp.v] + ([] if inp.mask is None else [inp.mask])

    def kernel_args(self, inp: AttentionInputs, stream_ptr: int) -> FactAttentionArgs:
        p = self.problem
        o = inp.outputs["o"][0]
        (qb, qh, qt), (kb, kh, kt), (vb, vh, vt) = p.q_strides, p.k_strides, p.v_strides
        (mb, mh, mt) = p.mask_strides
        ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
        return FactAttentionArgs(
            mask=None if inp.mask is None else ptr(inp.mask), mask_batch_stride=mb, mask_head_stride=mh,
            mask_row_stride=mt, mask_kind=MASK_KIND[p.mask],
            batch=p.batch, heads=p.heads, heads_kv=p.heads_kv, seq_q=p.seq_q, seq_k=p.seq_k, head_dim=p.head_dim,
            q=ptr(inp.q), q_batch_stride=qb, q_head_stride=qh, q_row_stride=qt,
            k=ptr(inp.k), k_batch_stride=kb, k_head_stride=kh, k_row_stride=kt,
            v=ptr(inp.v), v_batch_stride=vb, v_head_stride=vh, v_row_stride=vt,
            o=ptr(o), o_batch_stride=o.stride(0), o_head_stride=o.stride(1), o_row_stride=o.stride(2),
            scale=p.scale, causal=int(p.causal), workspace=None, workspace_bytes=0, stream=ctypes.c_void_p(stream_ptr))

    def _repeat_kv(self, t):
        """K/V heads repeated for grouped-query attention, as the module does (expand + reshape)."""
        p = self.problem
        group = p.heads // p.heads_kv
        if group == 1:
            return t
        b, hkv, s, d = t.shape
        return t[:, :, None].expand(b, hkv, group, s, d).reshape(b, hkv * group, s, d)

    def _causal_mask(self, device):
        import torch
        p = self.problem
        i = torch.arange(p.seq_q, device=device)[:, None]
        j = torch.arange(p.seq_k, device=device)[None, :]
        return j > i + (p.seq_k - p.seq_q)  # True = masked (bottom-right aligned; seq_q == seq_k here)

    def _chain(self, q, k, v, mask=None, safe=False):
        """The module's attention math: matmul, scale, causal masked_fill, the mask, softmax, matmul (safe: rows with
        every key masked give 0, as PyTorch's math back-end)."""
        import torch

        from ..compose.reference.attention import masked_scores, safe_softmax
        s = (q @ self._repeat_kv(k).transpose(-2, -1)) * self.problem.scale
        if self.problem.causal:
            s = s.masked_fill(self._causal_mask(q.device), float("-inf"))
        s = masked_scores(s, mask)
        return (safe_softmax(s) if safe else torch.softmax(s, dim=-1)) @ self._repeat_kv(v)

    def reference(self, inp: AttentionInputs) -> dict:
        mask = inp.mask.double() if inp.mask is not None and inp.mask.is_floating_point() else inp.mask
        return {"o": self._chain(inp.q.double(), inp.k.double(), inp.v.double(), mask, safe=True)}

    def _sdpa_mask(self, inp: AttentionInputs):
        """(attn_mask, is_causal) for SDPA, which takes one or the other: the causal mask joins an explicit one."""
        if inp.mask is None:
            return None, self.problem.causal
        if not self.problem.causal:
            return inp.mask, False
        return joined_causal_mask(inp.mask, self._causal_mask(inp.mask.device)), False

    def baselines(self) -> list:
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        p = self.problem

        def sdpa(backend):
            def run(inp):
                mask, causal = self._sdpa_mask(inp)
                with sdpa_kernel(backend):
                    return {"o": F.scaled_dot_product_attention(inp.q, self._repeat_kv(inp.k), self._repeat_kv(inp.v),
                                                                attn_mask=mask, is_causal=causal, scale=p.scale)}
            return run

        ways = [(f"sdpa {b.name.lower()}", sdpa(b)) for b in
                (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH)]
        ways.append(("eager matmul-softmax-matmul", lambda inp: {"o": self._chain(inp.q, inp.k, inp.v, inp.mask)}))
        return ways

    def verify_variants(self) -> list:
        p = self.problem
        out = []
        for seq in ODD_SEQ:
            sq = seq
            sk = seq if p.causal or p.seq_q == p.seq_k else max(1, seq - 82)
            b = min(p.batch, 2)
            old_q, old_k = (p.batch, p.heads, p.seq_q), (p.batch, p.heads_kv, p.seq_k)
            new_q, new_k = (b, p.heads, sq), (b, p.heads_kv, sk)
            out.append(replace(p, batch=b, seq_q=sq, seq_k=sk,
                               q_strides=restride(p.q_strides, old_q, new_q),
                               k_strides=restride(p.k_strides, old_k, new_k),
                               v_strides=restride(p.v_strides, old_k, new_k),
                               mask_strides=dense_mask_strides(p.mask_strides, b, p.heads, sq, sk)))
        return out


def dense_mask_strides(strides: tuple, batch: int, heads: int, seq_q: int, seq_k: int) -> tuple:
    """[batch, head, row] strides of a dense mask at other extents that repeats along the same dims as `strides`."""
    out, span = [0, 0, 0], seq_k
    for i, extent in ((2, seq_q), (1, heads), (0, batch)):
        if strides[i]:
            out[i], span = span, span * extent
    return tuple(out)


def joined_causal_mask(mask, causal):
    """The explicit mask with the causal mask (True = masked) joined: as bool (keep) or additive (-inf)."""
    if not mask.is_floating_point():
        return mask & ~causal
    return mask.masked_fill(causal, float("-inf"))


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


Case = AttentionCase
