"""Builds, verifies and times FACT's attention kernels on the GPU: sm80_mma (templates/cute/attention_fwd.cu.in,
mma.sync, every numerics mode), sm90_wgmma (templates/cute/attention_fwd_sm90.cu.in, Hopper warpgroup MMA,
bf16/fp16 only) and sm90_tma_ws (templates/cute/attention_fwd_sm90_ws.cu.in, the same MMA fed by TMA from a
producer warpgroup through mbarriers, bf16/fp16 only).

For each numerics mode and head dim it renders the templates for a small config space, compiles the
candidates in parallel, checks every candidate on random inputs (causal and not, odd sequence lengths,
grouped-query heads, the strided Q/K/V views a module makes from one fused QKV projection) against
float64 attention, then times the verified ones on the benchmark shapes against PyTorch in the same
numerics: every scaled_dot_product_attention back-end that accepts the inputs, and the eager
matmul-softmax-matmul chain. Masks (SDPA's attn_mask): a padding mask as Hugging Face's BERT builds it
([batch, 1, seq, seq] bool, keys past each sample's length masked), random holes, an additive one; a masked
call takes the kernel's workspace. Writes OUT/attention_rows.json (rows in the schema of
bench/results/gemm_h100.json) and prints a table, with the best time of each kernel per shape.

Usage (device): python3 bench/scripts/attention_h100.py --out $OUT [--numerics tf32,bf16] [--jobs 16]
                [--kernels sm80_mma,sm90_wgmma,sm90_tma_ws]
Kernels synchronized by mbarrier pipelines (ISOLATED) are first checked in a child process with a time limit,
so that a deadlocked candidate fails its check instead of hanging the run.
"""
from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
from fact.realize.kernel_abi import FactAttentionArgs  # noqa: E402
from fact.realize.timing import time_launches  # noqa: E402

# The kernels, their templates, axes and limits as the tuner reads them.
FAMILY = json.loads((ROOT / "data/families/attention.json").read_text())
KERNELS = {k["name"]: k for k in FAMILY["kernels"]}
TEMPLATES = {name: ROOT / "templates" / k["template"] for name, k in KERNELS.items()}
TAGS = {"sm80_mma": "attn", "sm90_wgmma": "attn90", "sm90_tma_ws": "attnws"}
KERNEL_COLUMNS = ["sm80_mma", "sm90_wgmma", "sm90_tma_ws", "sm90_tma_ws pingpong"]  # bench_shape's best_by_kernel keys
ISOLATED = {"sm90_tma_ws"}
CHECK_TIMEOUT_S = 120
ELEMENT = {"tf32": "float", "3xtf32": "float", "bf16": "cutlass::bfloat16_t", "fp16": "cutlass::half_t"}
TORCH_DTYPE = {"tf32": torch.float32, "3xtf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# The same numerics for PyTorch: fp32 matmuls on TF32 tensor cores or not.
MATMUL_PRECISION = {"tf32": "high", "3xtf32": "highest", "bf16": "highest", "fp16": "highest"}
SMEM_LIMIT = FAMILY["limits"]["smem_bytes"]["sm90"]
# Relative error vs float64 a kernel may have in each mode: a few units of the operand rounding (TF32 and
# fp16 keep 10 mantissa bits, bf16 7); 3xtf32 promises fp32 accuracy.
TOLERANCE = {"tf32": 2e-3, "bf16": 1.6e-2, "fp16": 2e-3, "3xtf32": 1e-6}


def configs(numerics: str, head_dim: int, kernels):
    size = 2 if numerics in ("bf16", "fp16") else 4
    if "sm80_mma" in kernels:
        pitch = head_dim + 16 // size
        for block_m, warps, block_n in itertools.product((64, 128), (4, 8), (32, 64, 128)):
            rows_per_warp = block_m // warps
            if rows_per_warp not in (16, 32):
                continue
            if (block_m + 2 * block_n) * pitch * size > SMEM_LIMIT:
                continue
            # Accumulators per thread: O (rows_per_warp/16 * head_dim/2) + S (rows_per_warp/16 * block_n/2).
            if rows_per_warp // 16 * (head_dim + block_n) // 2 > 160:
                continue
            yield {"kernel": "sm80_mma", "numerics": numerics, "head_dim": head_dim, "block_m": block_m,
                   "block_n": block_n, "warps": warps}
    # The Hopper kernels over their axes in data/families/attention.json, with its limits: head dims, rows per
    # warp (64 query rows per warpgroup of 4 warps) and Q + kv_stages of K and V plus the kernel's padding (1 KB to
    # align the swizzled tiles; the TMA kernel adds its mbarriers) in shared memory. The TMA kernel's warps count
    # its consumer warps only (the CTA adds a producer warpgroup).
    for kernel in ("sm90_wgmma", "sm90_tma_ws"):
        data = KERNELS[kernel]
        axes, limits = data["config_space"], data["limits"]
        if kernel not in kernels or numerics not in data["numerics"] or head_dim not in limits["head_dims"]:
            continue
        for block_m, block_n, warps, schedule in itertools.product(axes["block_m"], axes["block_n"], axes["warps"],
                                                                   axes.get("schedule", ["cooperative"])):
            if block_m % warps or block_m // warps not in limits["rows_per_warp"]:
                continue
            if schedule == "pingpong" and warps != 8:  # two consumer warpgroups take turns
                continue
            smem = (block_m + 2 * limits["kv_stages"] * block_n) * head_dim * size + limits["smem_padding_bytes"]
            if smem > SMEM_LIMIT:
                continue
            yield {"kernel": kernel, "numerics": numerics, "head_dim": head_dim, "block_m": block_m,
                   "block_n": block_n, "warps": warps, "schedule": schedule}


def config_id(c: dict) -> str:
    pingpong = "_pp" if c.get("schedule") == "pingpong" else ""
    return f"{TAGS[c['kernel']]}_{c['numerics']}_d{c['head_dim']}_m{c['block_m']}_n{c['block_n']}_w{c['warps']}{pingpong}"


def render(c: dict) -> str:
    values = {"config_id": config_id(c), "summary": json.dumps(c), "element": ELEMENT[c["numerics"]],
              "numerics": c["numerics"], "head_dim": str(c["head_dim"]), "block_m": str(c["block_m"]),
              "block_n": str(c["block_n"]), "warps": str(c["warps"]), "schedule": c.get("schedule", "cooperative"),
              "config_json": json.dumps(c),
              # The mask helpers every kernel includes (family.cpp renders them the same way, without values).
              "attention_mask": (ROOT / "templates/cute/attention_mask.cuh.in").read_text()}
    text = TEMPLATES[c["kernel"]].read_text()
    for k, v in values.items():
        text = text.replace("{{" + k + "}}", v)
    assert "{{" not in text, "template slot left unfilled"
    return text


def build(c: dict, work: Path, cutlass_include: str, abi_include: Path) -> dict:
    cid = config_id(c)
    src, lib = work / f"{cid}.cu", work / f"{cid}.so"
    src.write_text(render(c))
    cmd = ["nvcc", "-std=c++17", "-O3", "-arch=sm_90a", "--shared", "-Xcompiler", "-fPIC", "-Xptxas", "-v",
           f"-I{cutlass_include}", f"-I{abi_include}", str(src), "-o", str(lib)]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    info = {"id": cid, "config": c, "ok": r.returncode == 0, "seconds": round(time.time() - t0, 1)}
    regs = [line for line in r.stderr.splitlines() if "registers" in line]
    info["ptxas"] = regs[-1].strip() if regs else ""
    if r.returncode != 0:
        info["error"] = r.stderr[-3000:]
    return info


class Kernel:
    def __init__(self, lib: Path, cid: str):
        self.lib = ctypes.CDLL(str(lib), mode=ctypes.RTLD_LOCAL)
        self.run_fn = getattr(self.lib, f"fact_{cid}_run")
        self.run_fn.argtypes = [ctypes.POINTER(FactAttentionArgs)]
        self.can = getattr(self.lib, f"fact_{cid}_can_implement")
        self.can.argtypes = [ctypes.POINTER(FactAttentionArgs)]
        self.ws = getattr(self.lib, f"fact_{cid}_workspace_bytes")
        self.ws.argtypes = [ctypes.POINTER(FactAttentionArgs)]
        self.ws.restype = ctypes.c_size_t

    def args(self, q, k, v, o, causal: bool, scale: float, mask=None) -> FactAttentionArgs:
        """The call's arguments; a mask (broadcastable to [b, h, tq, tk]) with the workspace it needs, held by
        the returned struct's _keep."""
        a = FactAttentionArgs()
        a.batch, a.heads, a.seq_q, a.head_dim = q.shape
        a.heads_kv, a.seq_k = k.shape[1], k.shape[2]
        for name, t in zip("qkvo", (q, k, v, o)):
            assert t.stride(3) == 1
            setattr(a, name, t.data_ptr())
            setattr(a, f"{name}_batch_stride", t.stride(0))
            setattr(a, f"{name}_head_stride", t.stride(1))
            setattr(a, f"{name}_row_stride", t.stride(2))
        a.scale, a.causal = scale, int(causal)
        a.stream = torch.cuda.current_stream().cuda_stream
        a._keep = []
        if mask is not None:
            m = mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
            a.mask, a.mask_kind = m.data_ptr(), 1 if m.dtype == torch.bool else 2
            a.mask_batch_stride, a.mask_head_stride, a.mask_row_stride = m.stride(0), m.stride(1), m.stride(2)
            n = self.ws(ctypes.byref(a))
            ws = torch.full((max(n, 1),), 255, dtype=torch.uint8, device=q.device)  # poisoned: the kernel writes it
            a.workspace, a.workspace_bytes = ws.data_ptr(), n
            a._keep += [m, ws]
        return a


def reference(q, k, v, causal: bool, scale: float, mask=None) -> torch.Tensor:
    """float64 attention written out (the module's own math), GQA by repeating K/V heads; a query with every key
    masked gets 0 (PyTorch's math back-end's safe softmax, FACT's ABI)."""
    q, k, v = q.double(), k.double(), v.double()
    s = scores(q, k, causal, scale, None if mask is None else mask if mask.dtype == torch.bool else mask.double())
    p = s.softmax(-1)
    return torch.where(torch.isnan(p), 0.0, p) @ v.repeat_interleave(q.shape[1] // k.shape[1], 1)


def scores(q, k, causal: bool, scale: float, mask=None) -> torch.Tensor:
    """scale Q K^T with the causal mask (bottom-right aligned) and attn_mask (bool: false masks; else added)."""
    k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        tq, tk = q.shape[2], k.shape[2]
        keep = torch.ones(tq, tk, dtype=torch.bool, device=q.device).tril(tk - tq)
        s = s.masked_fill(~keep, float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return s


def make_mask(kind, b, tq, tk, dtype, device="cuda"):
    """None, or a mask as models make them: "padding" Hugging Face BERT's [b, 1, tq, tk] bool padding mask (keys
    past each sample's length in [tk/4, tk] masked); "holes" that with a quarter of the middle keys masked too
    (key blocks untouched, mixed and wholly masked side by side); "additive" a [b, 1, tq, tk] bias in the inputs'
    dtype, random where "holes" attends and -inf where it masks."""
    if kind is None:
        return None
    key = torch.arange(tk, device=device)
    lengths = torch.randint(max(1, tk // 4), tk + 1, (b, 1, 1, 1), device=device)
    keep = (key < lengths).expand(b, 1, tq, tk)
    if kind == "padding":
        return keep.contiguous()
    window = (key >= tk // 4) & (key < 3 * tk // 4)
    keep = keep & ~((torch.rand(b, 1, tq, tk, device=device) < 0.25) & window)
    if kind == "holes":
        return keep
    assert kind == "additive", kind
    return (torch.randn(b, 1, tq, tk, device=device) * window).masked_fill(~keep, float("-inf")).to(dtype)


def make_inputs(b, h, hkv, tq, tk, d, dtype, packed: bool):
    """Q/K/V as a module makes them: from one [B, T, (H + 2 Hkv) D] projection (packed, needs tq == tk)
    viewed as [B, H, T, D] with transposed strides, or as separate contiguous tensors."""
    if packed:
        qkv = torch.randn(b, tq, (h + 2 * hkv) * d, device="cuda", dtype=dtype)
        q, k, v = qkv.split([h * d, hkv * d, hkv * d], dim=2)
        return (q.view(b, tq, h, d).transpose(1, 2), k.view(b, tk, hkv, d).transpose(1, 2),
                v.view(b, tk, hkv, d).transpose(1, 2))
    return (torch.randn(b, h, tq, d, device="cuda", dtype=dtype), torch.randn(b, hkv, tk, d, device="cuda", dtype=dtype),
            torch.randn(b, hkv, tk, d, device="cuda", dtype=dtype))


def output_like_module(q):
    """[B, T, H, D] storage returned as its [B, H, T, D] view: the module's transpose(1, 2) is then free."""
    b, h, t, d = q.shape
    return torch.empty(b, t, h, d, device="cuda", dtype=q.dtype).transpose(1, 2)


def rel_err(x, ref) -> float:
    return float((x.double() - ref).norm() / ref.norm())


def torch_attention(q, k, v, causal, scale, mask=None):
    """PyTorch in the same numerics, as the module would compute it (eager chain)."""
    return scores(q, k, causal, scale, mask).softmax(-1) @ v.repeat_interleave(q.shape[1] // k.shape[1], 1)


CHECK_CASES = [  # b, h, hkv, tq, tk, causal, packed, mask
    (2, 4, 4, 77, 77, True, True, None),
    (2, 4, 4, 300, 333, False, False, None),
    (1, 8, 2, 129, 129, True, False, None),
    (3, 2, 2, 200, 517, True, False, None),
    (1, 2, 2, 1, 65, False, False, None),
    (2, 3, 3, 512, 512, True, True, None),
    (1, 4, 2, 130, 1029, True, False, None),  # many key blocks, a causal offset, a ragged last block, GQA
    (4, 3, 3, 256, 256, False, False, "padding"),
    (2, 4, 2, 300, 333, False, False, "holes"),
    (3, 2, 2, 200, 517, True, False, "holes"),  # with a causal offset
    (2, 3, 3, 129, 1029, False, True, "additive"),
]


def check(kernel: Kernel, c: dict) -> dict:
    dtype, d = TORCH_DTYPE[c["numerics"]], c["head_dim"]
    worst, results = 0.0, []
    ok = True
    for b, h, hkv, tq, tk, causal, packed, mask_kind in CHECK_CASES:
        torch.manual_seed(tq * 7 + tk)
        q, k, v = make_inputs(b, h, hkv, tq, tk, d, dtype, packed and tq == tk)
        mask = make_mask(mask_kind, b, tq, tk, dtype)
        o = output_like_module(q)
        o.fill_(float("nan"))
        scale = 1 / math.sqrt(d)
        status = kernel.run_fn(ctypes.byref(kernel.args(q, k, v, o, causal, scale, mask)))
        torch.cuda.synchronize()
        ref = reference(q, k, v, causal, scale, mask)
        torch.set_float32_matmul_precision(MATMUL_PRECISION[c["numerics"]])
        base = torch_attention(q, k, v, causal, scale, mask)
        err, base_err = (rel_err(o, ref) if status == 0 else float("inf")), rel_err(base, ref)
        # Within the mode's tolerance, or 2x PyTorch's own error in the same numerics where that is larger.
        good = status == 0 and not torch.isnan(o).any().item() and err <= max(TOLERANCE[c["numerics"]], 2 * base_err)
        ok &= good
        worst = max(worst, err)
        results.append({"case": [b, h, hkv, tq, tk, causal, packed, mask_kind], "status": status, "rel_err": err,
                        "torch_rel_err": base_err, "ok": bool(good)})
    return {"ok": bool(ok), "worst_rel_err": worst, "cases": results}


BENCH_SHAPES = {  # name: b, h, hkv, t, d, causal, packed, mask
    "minigpt_attention": (128, 8, 8, 512, 96, True, True, None),  # Q, K, V as the block's views of one QKV projection
    "minigpt_attention_contiguous": (128, 8, 8, 512, 96, True, False, None),
    "llama3_attention": (2, 32, 8, 2048, 128, True, False, None),
    "bert_attention": (32, 12, 12, 256, 64, False, False, None),  # BERT-base's shape
    "bert_padding_mask": (32, 12, 12, 256, 64, False, False, "padding"),  # and its padding mask
    "phi2_attention": (2, 32, 32, 2048, 80, True, False, None),  # Phi-2's heads of 80
}


def sdpa_backends():
    from torch.nn.attention import SDPBackend
    names = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
             "cudnn": getattr(SDPBackend, "CUDNN_ATTENTION", None)}
    return {k: v for k, v in names.items() if v is not None}


def bench_shape(name, shape, numerics, kernels, warmup_ms, rep_ms):
    from torch.nn.attention import sdpa_kernel
    b, h, hkv, t, d, causal, packed, mask_kind = shape
    dtype = TORCH_DTYPE[numerics]
    torch.set_float32_matmul_precision(MATMUL_PRECISION[numerics])
    torch.manual_seed(0)
    q, k, v = make_inputs(b, h, hkv, t, t, d, dtype, packed)
    mask = make_mask(mask_kind, b, t, t, dtype)
    scale = 1 / math.sqrt(d)
    ref = reference(q, k, v, causal, scale, mask) if b * h * t * t <= 2**31 else None
    rows, base = [], {}
    # PyTorch: each SDPA back-end alone (GQA through enable_gqa), and the eager chain.
    # A back-end without GQA support gets K/V expanded to every head first, as the module itself does
    # (the expansion is then part of its time).
    def sdpa(gqa: bool):
        if gqa:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale,
                                                  enable_gqa=True)
        group = h // hkv
        return F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1),
                                              attn_mask=mask, is_causal=causal, scale=scale)
    for bname, backend in sdpa_backends().items():
        for gqa in ((True, False) if hkv != h else (False,)):
            try:
                with sdpa_kernel([backend]):
                    out = sdpa(gqa)
                    torch.cuda.synchronize()
                    tm = time_launches(lambda i: sdpa(gqa), 1, warmup_ms, rep_ms)
                base[f"sdpa_{bname}"] = {"ms": tm.ms, "rel_err": rel_err(out, ref) if ref is not None else None,
                                         "gqa": "enable_gqa" if gqa else ("expanded K/V" if hkv != h else None)}
                break
            except RuntimeError as e:
                base[f"sdpa_{bname}"] = {"error": str(e).splitlines()[0][:200]}
    try:
        out = torch_attention(q, k, v, causal, scale, mask)
        tm = time_launches(lambda i: torch_attention(q, k, v, causal, scale, mask), 1, warmup_ms, rep_ms)
        base["eager_chain"] = {"ms": tm.ms, "rel_err": rel_err(out, ref) if ref is not None else None}
        del out
    except torch.cuda.OutOfMemoryError as e:
        base["eager_chain"] = {"error": str(e).splitlines()[0][:200]}
    torch.cuda.empty_cache()
    best, best_by_kernel, timed_kernels = None, {}, []
    for cid, (kernel, c) in kernels.items():
        o = output_like_module(q)
        a = kernel.args(q, k, v, o, causal, scale, mask)
        if kernel.can(ctypes.byref(a)) != 0:
            continue
        kernel.run_fn(ctypes.byref(a))
        torch.cuda.synchronize()
        tm = time_launches(lambda i: kernel.run_fn(ctypes.byref(a)), 1, warmup_ms, rep_ms)
        err = rel_err(o, ref) if ref is not None else None
        cand = {"id": cid, "config": c, "ms": tm.ms, "rel_err": err}
        timed_kernels.append({"id": cid, "ms": tm.ms})
        if best is None or cand["ms"] < best["ms"]:
            best = cand
        name_of = c["kernel"] + (" pingpong" if c.get("schedule") == "pingpong" else "")
        if name_of not in best_by_kernel or cand["ms"] < best_by_kernel[name_of]["ms"]:
            best_by_kernel[name_of] = cand
    timed = {k: v for k, v in base.items() if "ms" in v}
    for bname, bv in timed.items():
        row = {"problem": name, "pattern": "attention", "numerics": numerics,
               "baseline": ("PyTorch SDPA " + bname[5:]) if bname.startswith("sdpa_") else "PyTorch eager matmul-softmax-matmul",
               "baseline_ms": bv["ms"], "baseline_rel_err": bv["rel_err"],
               "shape": {"batch": b, "heads": h, "heads_kv": hkv, "seq": t, "head_dim": d, "causal": causal,
                         "qkv_packed": packed, "mask": mask_kind}}
        if best:
            row.update({"fact_ms": best["ms"], "speedup": bv["ms"] / best["ms"], "rel_err": best["rel_err"],
                        "config": best["config"], "kept": "fact" if best["ms"] < bv["ms"] * 0.97 else "pytorch"})
        rows.append(row)
    fastest_sdpa = min((v["ms"] for k, v in timed.items() if k.startswith("sdpa_")), default=None)
    return rows, {"baselines": base, "best": best, "best_by_kernel": best_by_kernel, "fastest_sdpa_ms": fastest_sdpa,
                  "candidates": sorted(timed_kernels, key=lambda x: x["ms"])}


def markdown(result: dict) -> str:
    n_ok = sum(c["ok"] for c in result["checks"])
    worst = {}
    for c in result["checks"]:
        n = ("" if c["kernel"] == "sm80_mma" else c["kernel"] + " ") + c["id"].split("_")[1]
        worst[n] = max(worst.get(n, 0.0), c["worst_rel_err"])
    lines = [f"# FACT attention kernel vs PyTorch ({result['device']})", "",
             f"date {result['date']}, commit {result['commit']}, torch {result['torch']}, CUDA {result['cuda']}. "
             f"Script: bench/scripts/attention_h100.sh. Times are medians (CUDA events, back-to-back launches).", "",
             f"Verification: {n_ok}/{len(result['checks'])} candidates passed on {len(CHECK_CASES)} random cases each "
             "(causal and not, odd sequence lengths 1/77/129/130/200/300/333/517/1029, GQA, strided QKV views, padding, "
             "holed and additive masks) against float64; "
             "worst rel err per mode: " + ", ".join(f"{k} {v:.1e}" for k, v in sorted(worst.items())) + ".", "",
             "| problem | numerics | baseline | baseline ms | FACT ms | speedup | FACT rel err | baseline rel err | FACT config |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        c = r.get("config") or {}
        cfg = (f"{c.get('kernel')} m{c.get('block_m')} n{c.get('block_n')} w{c.get('warps')}"
               + (" pingpong" if c.get("schedule") == "pingpong" else "")) if c else "none verified"
        fmt = lambda x, f: (f % x) if isinstance(x, (int, float)) else "n/a"
        lines.append(f"| {r['problem']} | {r['numerics']} | {r['baseline']} | {fmt(r['baseline_ms'], '%.3f')} | "
                     f"{fmt(r.get('fact_ms'), '%.3f')} | {fmt(r.get('speedup'), '%.2fx')} | {fmt(r.get('rel_err'), '%.1e')} | "
                     f"{fmt(r.get('baseline_rel_err'), '%.1e')} | {cfg} |")
    # Each kernel's (and schedule's) best on each shape, so that kernels and schedules compare side by side.
    lines += ["", "Best candidate of each kernel (ms):", "", "| problem / numerics | " +
              " | ".join(KERNEL_COLUMNS) + " | fastest SDPA |", "|---|" + "---|" * (len(KERNEL_COLUMNS) + 1)]
    for shape, det in result.get("details", {}).items():
        best = det.get("best_by_kernel", {})
        cells = [f"{best[k]['ms']:.3f}" if k in best else "-" for k in KERNEL_COLUMNS]
        fastest = det.get("fastest_sdpa_ms")
        lines.append(f"| {shape} | " + " | ".join(cells) + (f" | {fastest:.3f} |" if fastest else " | - |"))
    lines += ["", "numerics: tf32 = fp32 in/out, TF32 tensor cores (PyTorch: set_float32_matmul_precision('high'); "
              "SDPA's only fp32 back-end, efficient, computes in fp32 regardless); 3xtf32 = fp32 in/out, fp32-accurate "
              "(PyTorch 'highest'); bf16/fp16 = 16-bit in/out, fp32 softmax and accumulation.", ""]
    return "\n".join(lines)


def isolated_check(lib: Path, b: dict) -> dict:
    """check() in a child process under a time limit: a hang or crash there is a failed check, not a stuck run."""
    cmd = [sys.executable, __file__, "--check-one", str(lib), b["id"], json.dumps(b["config"])]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"ok": False, "worst_rel_err": float("inf"), "cases": [],
                "error": f"check did not finish in {CHECK_TIMEOUT_S} s (deadlock?)"}
    for line in r.stdout.splitlines():
        if line.startswith("CHECK_RESULT "):
            return json.loads(line[len("CHECK_RESULT "):])
    return {"ok": False, "worst_rel_err": float("inf"), "cases": [],
            "error": f"check process exited {r.returncode}: {r.stderr[-1500:]}"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out/attention")))
    ap.add_argument("--numerics", default="tf32,3xtf32,bf16,fp16")
    ap.add_argument("--head-dims", default="64,96,128")
    ap.add_argument("--kernels", default="sm80_mma,sm90_wgmma,sm90_tma_ws", help="which attention kernels to build")
    ap.add_argument("--check-one", nargs=3, metavar=("LIB", "ID", "CONFIG_JSON"),
                    help="(internal) check one built candidate and print its result as JSON")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--warmup-ms", type=float, default=50)
    ap.add_argument("--rep-ms", type=float, default=300)
    ap.add_argument("--commit", default="unknown", help="the commit measured (the device copy has no .git)")
    args = ap.parse_args()
    if args.check_one:
        lib, cid, config = args.check_one
        print("CHECK_RESULT " + json.dumps(check(Kernel(Path(lib), cid), json.loads(config))), flush=True)
        return 0
    cutlass_include = os.path.join(os.environ["CUTLASS_DIR"], "include")
    work = Path("/tmp/fact-attention")
    work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    # kernel_abi.h as the tuner's kernels see it, rendered from the data by the fact binary.
    fact_bin = os.environ.get("FACT_BIN") or str(ROOT / "build" / "fact")
    subprocess.run([fact_bin, "ops", "abi-header", "--out", str(work / "include" / "kernel_abi.h")], check=True)
    numerics = args.numerics.split(",")
    head_dims = [int(x) for x in args.head_dims.split(",")]
    kernels = args.kernels.split(",")
    unknown = [k for k in kernels if k not in TEMPLATES]
    if unknown:
        ap.error(f"unknown kernel(s) {unknown}: use {sorted(TEMPLATES)}")
    cands = [c for n in numerics for d in head_dims for c in configs(n, d, kernels)]
    print(f"building {len(cands)} candidates with {args.jobs} jobs", flush=True)
    t0 = time.time()
    with ThreadPoolExecutor(args.jobs) as pool:
        builds = list(pool.map(lambda c: build(c, work, cutlass_include, work / "include"), cands))
    print(f"built in {time.time() - t0:.0f} s: {sum(b['ok'] for b in builds)} ok, "
          f"{sum(not b['ok'] for b in builds)} failed", flush=True)
    for b in builds:
        if not b["ok"]:
            print(f"  {b['id']}: build failed\n{b['error'][-1500:]}", flush=True)
    verified, checks = {}, []
    for b in builds:
        if not b["ok"]:
            continue
        lib = work / f"{b['id']}.so"
        res = isolated_check(lib, b) if b["config"]["kernel"] in ISOLATED else None
        kernel = None
        if res is None or res["ok"]:
            kernel = Kernel(lib, b["id"])
            res = check(kernel, b["config"])
        checks.append({"id": b["id"], "kernel": b["config"]["kernel"], "ptxas": b["ptxas"], **res})
        print(f"  check {b['id']}: {'ok' if res['ok'] else 'FAILED'} worst rel err {res['worst_rel_err']:.2e} "
              f"[{b['ptxas']}]", flush=True)
        if not res["ok"]:
            if "error" in res:
                print(f"     {res['error']}", flush=True)
            for cse in res["cases"]:
                if not cse["ok"]:
                    print(f"     {cse}", flush=True)
        else:
            verified[b["id"]] = (kernel, b["config"])
    rows, details = [], {}
    for name, shape in BENCH_SHAPES.items():
        for n in numerics:
            ks = {cid: kc for cid, kc in verified.items() if kc[1]["numerics"] == n and kc[1]["head_dim"] == shape[4]}
            r, det = bench_shape(name, shape, n, ks, args.warmup_ms, args.rep_ms)
            rows += r
            details[f"{name}/{n}"] = det
            best = det["best"]
            print(f"{name} {n}: FACT {best['ms'] if best else float('nan'):.3f} ms "
                  f"({best['id'] if best else 'none verified'}); " +
                  "".join(f"{k} {v['ms']:.3f} ({v['id']}), " for k, v in sorted(det["best_by_kernel"].items())) +
                  ", ".join(f"{k} {v['ms']:.3f}" if "ms" in v else f"{k} n/a" for k, v in det["baselines"].items()),
                  flush=True)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
              "date": time.strftime("%Y-%m-%d"), "commit": args.commit, "builds": builds, "checks": checks, "rows": rows,
              "details": details}
    # Named by the GPU measured (attention_h100.*, attention_h200.*), so results of two machines never mix.
    tag = next((t for t in ("h100", "h200") if t in result["device"].lower()), "gpu")
    (args.out / f"attention_{tag}.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / f"attention_{tag}.md").write_text(markdown(result))
    return 0 if rows and all(c["ok"] for c in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
