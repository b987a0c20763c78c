"""Where each variant's GPU time goes: the end-to-end check's timed variants (eager, the composed module op by op
and as one CUDA graph, torch.compile's modes) run under torch.profiler, their CUDA kernels summed by name.

The interleaved timing says which variant is faster; this says in which kernels (a composed module that loses to
torch.compile's reduce-overhead at a small batch although every FACT kernel beat cuDNN in the tuner, whose inputs
are cold). Kernel times are the profiler's device times per call, so a variant's total is its GPU time without the
host's gaps. Used by `python -m fact.compose.e2e_check ... --profile FILE` (bench/scripts/model_h100.sh PROFILE=1).
"""
from __future__ import annotations

import json
from pathlib import Path

TOP_KERNELS = 40  # kernels listed per variant, by time
NAME_CHARS = 160  # a CUTLASS kernel's mangled template name runs to thousands of characters


def kernel_table(events, calls: int) -> dict:
    """Profiler key averages -> the variant's GPU ms per call and its kernels by time. `events`: objects with key,
    count, device_type and self_device_time_total (microseconds, all calls), as torch.profiler's key_averages()."""
    rows = []
    for e in events:
        device_type = str(getattr(e, "device_type", ""))
        if not device_type.endswith("CUDA"):
            continue
        us = float(getattr(e, "self_device_time_total", 0.0) or 0.0)
        if us <= 0:
            continue
        rows.append({"kernel": str(e.key)[:NAME_CHARS], "ms_per_call": us / 1e3 / calls,
                     "launches_per_call": e.count / calls})
    rows.sort(key=lambda r: -r["ms_per_call"])
    total = sum(r["ms_per_call"] for r in rows)
    return {"calls": calls, "gpu_ms_per_call": total, "kernels": rows[:TOP_KERNELS],
            "kernels_left_out": max(0, len(rows) - TOP_KERNELS)}


def profile_variants(fns: dict, inputs, calls: int = 10) -> dict:
    """Each callable of `fns` (name -> fn(*inputs)) warmed up, then `calls` calls under torch.profiler (CUDA
    activity). A variant whose profile fails is reported with its error, never dropped."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    out = {}
    for name, fn in fns.items():
        try:
            for _ in range(3):
                fn(*inputs)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(calls):
                    fn(*inputs)
                torch.cuda.synchronize()
            out[name] = kernel_table(prof.key_averages(), calls)
        except Exception as e:  # noqa: BLE001 - reported in the file
            out[name] = {"error": f"{type(e).__name__}: {e}"[:1000]}
    return out


def summary_lines(profiles: dict, top: int = 8) -> list[str]:
    """A few lines a variant: its GPU ms per call and its heaviest kernels."""
    lines = []
    for name, p in profiles.items():
        if "error" in p:
            lines.append(f"{name}: profile failed: {p['error']}")
            continue
        lines.append(f"{name}: {p['gpu_ms_per_call']:.4f} ms of kernels a call")
        for k in p["kernels"][:top]:
            lines.append(f"  {k['ms_per_call']:.4f} ms  x{k['launches_per_call']:g}  {k['kernel'][:100]}")
    return lines


def write_profile(path: Path, profiles: dict, meta: dict) -> None:
    Path(path).write_text(json.dumps({"format": "fact-kernel-profile", "version": 1, **meta,
                                      "variants": profiles}, indent=1) + "\n")
