"""The GPU lock of `fact bench --jobs N` on one GPU: processes holding it never overlap; without it, no wait."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from fact.gpu_lock import ENV, child_env, holds_gpu

ROOT = Path(__file__).resolve().parents[2]

# A process whose main() holds the lock for 1 s (long against process start-up, so unlocked ones overlap) and records when it held it.
HOLDER = textwrap.dedent("""
    import sys, time
    from fact.gpu_lock import holds_gpu

    @holds_gpu
    def main(path):
        start = time.time()
        time.sleep(1.0)
        with open(path, "a") as f:
            f.write(f"{start} {time.time()}\\n")
        return 0

    sys.exit(main(sys.argv[1]))
""")


def run_holders(tmp_path: Path, n: int, lock: str | None) -> list[tuple[float, float]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    env.pop(ENV, None)
    if lock:
        env[ENV] = lock
    log = tmp_path / "held.txt"
    procs = [subprocess.Popen([sys.executable, "-c", HOLDER, str(log)], env=env) for _ in range(n)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    return sorted(tuple(map(float, line.split())) for line in log.read_text().splitlines())


def test_holders_of_one_lock_take_turns(tmp_path):
    spans = run_holders(tmp_path, 3, str(tmp_path / ".gpu0.lock"))
    assert len(spans) == 3
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end - 1e-3, f"two holders overlapped: {spans}"


def test_without_a_lock_processes_run_together(tmp_path):
    spans = run_holders(tmp_path, 3, None)
    assert len(spans) == 3
    # All three sleeps overlap somewhere: the latest start comes before the earliest end.
    assert max(s for s, _ in spans) < min(e for _, e in spans), spans


def test_the_lock_is_released_when_main_raises(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path / "l.lock"))

    @holds_gpu
    def failing():
        raise RuntimeError("kernel crashed")

    try:
        failing()
    except RuntimeError:
        pass

    @holds_gpu
    def ok():
        return 7

    t0 = time.monotonic()
    assert ok() == 7  # would block forever if the first holder had kept the flock
    assert time.monotonic() - t0 < 5


def test_children_of_a_holder_do_not_wait_for_their_parent(monkeypatch):
    monkeypatch.setenv(ENV, "/tmp/some.lock")
    assert ENV not in child_env()
    assert child_env()["PATH"] == os.environ["PATH"]
