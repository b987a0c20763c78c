"""Several `fact bench` workers on one GPU: every process that runs GPU work holds the GPU's lock.

`fact bench --jobs N` with more workers than GPUs overlaps the CPU-bound part of its problems (tracing,
nvcc builds) but never their GPU work: a kernel of one problem running while another problem is timed
would make both timings wrong. The bench runner names one lock file per GPU in FACT_GPU_LOCK; without
it (a lone `fact optimize`) holding the lock is a no-op.
"""
from __future__ import annotations

import fcntl
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
                fcntl.flock(f, fcntl.LOCK_UN)
    return locked


def child_env() -> dict:
    """The environment for a child of a lock-holding process (the child is covered by its parent's lock)."""
    env = dict(os.environ)
    env.pop(ENV, None)
    return env
