"""Timing a launch with CUDA events: warm-up, median over many samples, rotating input sets.

Each sample is one CUDA-event pair around a sweep over the rotating input sets; the sample's time per
launch is (end - start) / launches, and the reported time is the median over samples. The input sets
rotate so that, for small problems, what one launch reads was evicted from L2 before it is read again
(total bytes >= 2x L2). Before each sample the GPU is held busy with torch.cuda._sleep for about the
time the host needs to enqueue the sample, so that host launch overhead (ctypes, PyTorch dispatch)
does not leave the GPU idle between launches inside the timed region.

So the figure is the back-to-back time per launch on cold inputs, as in a model's forward pass. On the
H100 (2026-11) it read 5-7% under triton's do_bench (which times each call alone after an L2 flush) for
0.17-0.35 ms GEMMs, 18% under at 7.5 us and 37% under at 3.8 us, where do_bench's per-call launch and
event gaps dominate. Baseline and candidates are timed the same way, so their ratio is fair.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

MAX_SETS = 256
MIN_SAMPLES = 10
MAX_SAMPLES = 2000
MAX_SLEEP_MS = 20.0


def median_us(fn, reps: int = 25, warmup: int = 5) -> float:
    """Median of `reps` calls of fn, each alone between a CUDA-event pair, after `warmup` calls, in microseconds:
    a quick figure for a profile or a probe (not for the tuner: no rotating inputs, launch gaps included)."""
    import torch
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    times.sort()
    return times[len(times) // 2]


def rotation_count(bytes_per_set: int, l2_bytes: int) -> int:
    """Input sets to rotate through so that their total exceeds twice the L2.

    At least two unless one set is over 8x the L2: with a single set of a few L2 sizes, the tail of
    what one launch touched is still in L2 when the next launch starts on the same buffers.
    """
    if bytes_per_set <= 0 or bytes_per_set > 8 * l2_bytes:
        return 1
    return max(2, min(MAX_SETS, math.ceil(2 * l2_bytes / bytes_per_set)))


@dataclass
class Timing:
    ms: float              # median time per launch
    p20_ms: float
    p80_ms: float
    samples: int
    launches_per_sample: int

    def to_json(self) -> dict:
        return {"ms": self.ms, "p20_ms": self.p20_ms, "p80_ms": self.p80_ms,
                "samples": self.samples, "launches_per_sample": self.launches_per_sample}


_cycles_per_ms: float | None = None


def _sleep_cycles_per_ms() -> float:
    """Calibrates torch.cuda._sleep (a spin of N clock cycles) once per process."""
    global _cycles_per_ms
    if _cycles_per_ms is None:
        import torch
        cycles = 2_000_000
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)  # first call loads the kernel
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        _cycles_per_ms = cycles / max(start.elapsed_time(end), 1e-3)
    return _cycles_per_ms


def time_launches(launch: Callable[[int], None], n_sets: int, warmup_ms: float, rep_ms: float) -> Timing:
    """Times launch(i) for i over the rotating sets. `launch` only enqueues work on the current stream."""
    import torch
    stream = torch.cuda.current_stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def sweep(count: int) -> None:
        for j in range(count):
            launch(j % n_sets)

    # Estimate: one launch to load/compile, then a sweep timed on both device and host.
    launch(0)
    torch.cuda.synchronize()
    per_sample = max(n_sets, 1)
    t0 = time.perf_counter()
    start.record(stream)
    sweep(per_sample)
    end.record(stream)
    host_ms = (time.perf_counter() - t0) * 1e3
    end.synchronize()
    est_ms = max(start.elapsed_time(end) / per_sample, 1e-4)

    # Small launches: put enough of them in a sample that event overhead is negligible (>= ~0.2 ms).
    while per_sample * est_ms < 0.2 and per_sample < 64 * max(n_sets, 1):
        per_sample += max(n_sets, 1)
    host_per_launch_ms = host_ms / max(n_sets, 1)

    deadline = time.perf_counter() + warmup_ms / 1e3
    while time.perf_counter() < deadline:
        sweep(per_sample)
        torch.cuda.synchronize()

    samples = int(min(MAX_SAMPLES, max(MIN_SAMPLES, rep_ms / (per_sample * est_ms))))
    sleep_ms = min(MAX_SLEEP_MS, 1.5 * host_per_launch_ms * per_sample)
    sleep_cycles = int(sleep_ms * _sleep_cycles_per_ms())
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(samples)]
    for s, e in pairs:
        if sleep_cycles > 0:
            torch.cuda._sleep(sleep_cycles)
        s.record(stream)
        sweep(per_sample)
        e.record(stream)
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) / per_sample for s, e in pairs)
    q = statistics.quantiles(times, n=5) if len(times) >= 5 else [times[0]] * 4
    return Timing(ms=statistics.median(times), p20_ms=q[0], p80_ms=q[3], samples=samples,
                  launches_per_sample=per_sample)
