"""Several `fact bench` workers on one GPU: every process that runs GPU work holds the GPU's lock.

`fact bench --jobs N` with more workers than GPUs overlaps the CPU-bound part of its problems (tracing,
nvcc builds) but never their GPU work: a kernel of one problem running while another problem is timed
would make both timings wrong. The bench runner names one lock file per GPU in FACT_GPU_LOCK; without
it (a lone `fact optimize`) holding the lock is a no-op.
"""
from __future__ import annotations

import fcntl
import gc
import functools
import os
import sys
import time

ENV = "FACT_GPU_LOCK"


def holds_gpu(main):
    """Decorates a process's main(): the GPU's lock is taken before it starts and released when it returns.

    Only for the entry point of a process, never for a function that a GPU-holding process calls or
    starts as a child (flock would make it wait for its own parent): children are started without ENV.
    """
    @functools.wraps(main)
    def locked(*args, **kwargs):
        path = os.environ.get(ENV)
        if not path:
            return main(*args, **kwargs)
        with open(path, "a") as f:
            t0 = time.monotonic()
            fcntl.flock(f, fcntl.LOCK_EX)
            waited = time.monotonic() - t0
            if waited >= 1.0:
                print(f"[gpu lock] waited {waited:.0f} s for the GPU ({path})", file=sys.stderr)
            try:
                return main(*args, **kwargs)
            finally:
                release_gpu_memory()
                fcntl.flock(f, fcntl.LOCK_UN)
    return locked


def release_gpu_memory() -> None:
    """Returns what this process's caching allocator holds to the GPU before the lock goes to the next holder:
    a long-lived worker keeping a finished check's tens of GB cached left the next problem's 6 GB inputs out of
    memory on the H100 (KernelBench level 1)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return
    try:
        gc.collect()  # tensors held only by reference cycles (modules, frames of a caught exception)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - a lost CUDA context frees its memory with the process
        pass


def child_env() -> dict:
    """The environment for a child of a lock-holding process (the child is covered by its parent's lock)."""
    env = dict(os.environ)
    env.pop(ENV, None)
    return env
