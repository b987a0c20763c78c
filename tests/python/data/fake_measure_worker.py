"""A stand-in for fact.realize.measure_worker that needs no GPU: tests measure.py's isolation.

It speaks the worker protocol and behaves by candidate id prefix: ok_* reports ok, segv_* kills
itself with SIGSEGV, hang_* sleeps forever, lost_* reports `crashed` and exits 70 (CUDA context lost),
garbage_* prints a non-JSON line first. FAKE_WORKER_LOG (env) collects one line per worker start;
FAKE_WORKER_SETUP=fail makes set-up fail. The job's path comes as the argument or on stdin, as the real worker's.
"""
import json
import os
import signal
import sys
import time


def emit(event, **fields):
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def main():
    started = time.time()
    job_path = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.readline().strip()
    if not job_path:
        return 0  # a worker started ahead that got no job
    job = json.load(open(job_path))
    log = os.environ.get("FAKE_WORKER_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"candidates": job["candidate_ids"], "baseline": job["baseline"], "pid": os.getpid(),
                                "waited_s": time.time() - started}) + "\n")
    if os.environ.get("FAKE_WORKER_SETUP") == "fail":
        print("set-up exploded", file=sys.stderr)
        emit("fatal", message="worker set-up failed: RuntimeError: set-up exploded")
        return 1
    emit("ready", device="Fake GPU", torch="0.0", cuda="0.0")
    if job["baseline"]:
        emit("start", item="baseline")
        emit("baseline", name="torch.matmul (cuBLAS)", precision="highest", status="ok", ms=1.0,
             rel_err=1e-7, max_abs_err=1e-6, fp32_reference_err=1e-7)
    for cid in job["candidate_ids"]:
        emit("start", item=cid)
        if cid.startswith("segv_"):
            print("about to segfault", file=sys.stderr)
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGSEGV)
        if cid.startswith("hang_"):
            time.sleep(3600)
        if cid.startswith("lost_"):
            emit("candidate", id=cid, status="crashed", message="CUDA error: an illegal memory access")
            return 70
        if cid.startswith("garbage_"):
            print("not json")
            sys.stdout.flush()
        emit("candidate", id=cid, status="ok", ms=0.5, rel_err=1e-7, max_abs_err=1e-6, tolerance=1e-5)
    emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
