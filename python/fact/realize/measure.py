"""`python -m fact.realize.measure REQUEST.json -o RESULT.json`: verify and time kernel candidates of the
kernel family named by request.family (family_cases.py; GEMM when absent).

Called by the C++ tuner. The request names one problem of the family and candidate libraries (see
measure_request.py); the result holds, per candidate, a status, the median time and the error against a
float64 reference, beside PyTorch's baseline (cuBLAS for GEMM) timed in the same run and the same numerics.

Isolation: candidates run in a worker subprocess (measure_worker.py) that streams one JSON line per
result. If the worker dies (segfault, poisoned CUDA context) the candidate it was measuring is recorded
as `crashed`; if it exceeds the per-candidate time limit it is killed and the candidate is `timeout` (the other
run-time variants of its kernel are then `skipped`). Either way a fresh worker measures the rest. A worker reads its job's path from stdin, so one can be started
ahead of its request: `--prewarm` (sent by the tuner before it compiles a pattern's kernels) starts a spare that
imports torch while nvcc runs (seconds on the GPU machine, once per worker); the next request takes it.

Exit codes: 0 result written (or, with --prewarm, a spare started or already there); 1 result written but the
worker could not be set up (see messages); 2 bad request (one line on stderr naming the field); 3 no CUDA GPU on
this machine (one line).
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .family_cases import case_for
from .measure_request import MeasureRequest, RequestError, load_request

EXIT_OK, EXIT_WORKER_FAILED, EXIT_BAD_REQUEST, EXIT_NO_GPU = 0, 1, 2, 3
STARTUP_TIMEOUT_S = 300.0   # importing torch, creating the CUDA context, drawing the rotating input sets
MAX_FAILED_STARTS = 2
PYTHON_ROOT = Path(__file__).resolve().parents[2]


def cuda_unavailable_reason() -> str | None:
    """Asked of the CUDA driver, not torch (importing it here would cost seconds; the worker imports it)."""
    from fact.environment import cuda_answer
    answer = cuda_answer()
    return None if answer["cuda"] else answer["cuda_reason"] or "no CUDA device"


class LineReader:
    """Reads lines from a pipe with a deadline, without blocking past it."""

    def __init__(self, fd: int):
        self.fd, self.buf = fd, b""

    def readline(self, deadline: float) -> str | None:
        """A line, None at EOF; raises TimeoutError at the deadline."""
        while b"\n" not in self.buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                raise TimeoutError
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode("utf-8", errors="replace")


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def tail(path: Path, limit: int = 600) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if line.strip()][-4:]
    return " | ".join(lines)[-limit:]


WORKER_ARGV = (sys.executable, "-m", "fact.realize.measure_worker")  # the job's path follows on its stdin


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PYTHON_ROOT), env.get("PYTHONPATH")]))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def start_worker(argv, env: dict[str, str], err_path: Path) -> subprocess.Popen:
    with open(err_path, "wb") as err:
        return subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                                start_new_session=True)


class Spare:
    """The worker started ahead of its request (at most one per process), and what it was started with."""

    current: "Spare | None" = None

    def __init__(self, argv, env: dict[str, str]):
        self.argv, self.env = tuple(argv), env
        self.dir = Path(tempfile.mkdtemp(prefix="fact-measure-spare-"))
        self.err_path = self.dir / "worker.stderr"
        self.proc = start_worker(argv, env, self.err_path)

    def fits(self, argv, env: dict[str, str]) -> bool:
        return self.proc.poll() is None and self.argv == tuple(argv) and self.env == env

    def end(self) -> None:
        """An unused spare exits at the end of its stdin; one that does not is killed."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            Orchestrator._kill(self.proc)
        self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def prewarm(argv=WORKER_ARGV) -> bool:
    """Starts a spare worker unless one that fits is there; True when one was started."""
    env = worker_env()
    if Spare.current is not None and Spare.current.fits(argv, env):
        return False
    end_spare()
    Spare.current = Spare(argv, env)
    return True


def take_spare(argv, env: dict[str, str]) -> Spare | None:
    spare, Spare.current = Spare.current, None
    if spare is not None and not spare.fits(argv, env):
        spare.end()  # another command or environment (or it died): a fresh worker is started instead
        spare = None
    return spare


def end_spare() -> None:
    spare, Spare.current = Spare.current, None
    if spare is not None:
        spare.end()


atexit.register(end_spare)


class Orchestrator:
    """Runs workers until the baseline and every candidate have a result."""

    def __init__(self, request: MeasureRequest, worker_argv=WORKER_ARGV, log=None):
        self.request = request
        self.worker_argv = worker_argv
        self.log = log  # None: the stderr of the moment (fact's long-lived worker swaps it per request)
        self.env: dict = {}
        self.baseline: dict | None = None
        self.results: dict[str, dict] = {}
        self.fatal: str | None = None

    def pending(self) -> list[str]:
        return [c.id for c in self.request.candidates if c.id not in self.results]

    def run(self) -> dict:
        failed_starts = 0
        baseline_pending = self.request.baseline
        # Each worker finishes an item or fails to start; the cap guards against neither happening.
        max_workers = len(self.request.candidates) + MAX_FAILED_STARTS + 2
        with tempfile.TemporaryDirectory(prefix="fact-measure-") as tmp:
            for n in range(max_workers):
                if n > 0 and not (baseline_pending or self.pending()):
                    break
                progressed, started = self._run_worker(Path(tmp), baseline_pending)
                baseline_pending = self.request.baseline and self.baseline is None
                if not started and not progressed:
                    failed_starts += 1
                    if failed_starts >= MAX_FAILED_STARTS:
                        break
            else:
                if baseline_pending or self.pending():
                    self.fatal = self.fatal or "workers stopped making progress"
        reason = self.fatal or "the measuring worker could not be started"
        if self.request.baseline and self.baseline is None:
            self.baseline = {"status": "failed", "message": reason}
        for cid in self.pending():
            self.results[cid] = {"id": cid, "status": "crashed", "message": f"not measured: {reason}"}
        return self.result()

    def _run_worker(self, tmp: Path, baseline: bool) -> tuple[bool, bool]:
        """One worker's life; returns (completed any item, got past set-up)."""
        job = {"request": self.request.to_json(), "candidate_ids": self.pending(), "baseline": baseline}
        n = len(list(tmp.glob("job-*.json")))
        job_path, err_path = tmp / f"job-{n}.json", tmp / f"worker-{n}.stderr"
        job_path.write_text(json.dumps(job))
        env = worker_env()
        spare = take_spare(self.worker_argv, env)
        if spare is not None:
            proc, err_path = spare.proc, spare.err_path
        else:
            proc = start_worker(self.worker_argv, env, err_path)
        try:
            proc.stdin.write(f"{job_path}\n".encode())
            proc.stdin.close()
        except OSError:
            pass  # it died before its job: read below as a worker that exited in set-up
        reader = LineReader(proc.stdout.fileno())
        current: str | None = None
        ready = progressed = False
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        try:
            while True:
                try:
                    line = reader.readline(deadline)
                except TimeoutError:
                    self._kill(proc)
                    what = f"after {self.request.timeout_s:g} s" if ready else f"in set-up after {STARTUP_TIMEOUT_S:g} s"
                    self._record(current, "timeout", f"worker killed: no result {what}", ready)
                    return progressed or current is not None, ready
                if line is None:  # EOF: the worker exited or died
                    code = proc.wait()
                    if current is not None:
                        msg = f"worker died while measuring it ({describe_exit(code)})"
                        detail = tail(err_path)
                        self._record(current, "crashed", msg + (f"; stderr: {detail}" if detail else ""), ready)
                        return True, ready
                    if not ready and self.fatal is None:
                        self.fatal = f"worker exited during set-up ({describe_exit(code)}); stderr: {tail(err_path)}"
                    return progressed, ready
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    self._say(f"ignoring a non-JSON line from the worker: {line[:200]}")
                    continue
                kind = event.pop("event", None)
                if kind == "ready":
                    ready, self.fatal = True, None
                    self.env = event
                elif kind == "start":
                    current = event.get("item")
                    deadline = time.monotonic() + self.request.timeout_s
                elif kind == "baseline":
                    self.baseline = event
                    current, progressed = None, True
                    deadline = time.monotonic() + self.request.timeout_s
                elif kind == "candidate":
                    self.results[event["id"]] = event
                    current, progressed = None, True
                    deadline = time.monotonic() + self.request.timeout_s
                elif kind == "fatal":
                    self.fatal = event.get("message", "worker failed")
                elif kind == "done":
                    proc.wait()
                    return True, ready
        finally:
            if proc.poll() is None:
                self._kill(proc)
            proc.stdout.close()
            if spare is not None:
                shutil.rmtree(spare.dir, ignore_errors=True)

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    def _record(self, item: str | None, status: str, message: str, ready: bool) -> None:
        if item is None:
            if not ready:
                self.fatal = message
            return
        if item == "baseline":
            self.baseline = {"status": "failed", "message": f"baseline {status}: {message}"}
            return
        self.results[item] = {"id": item, "status": status, "message": message}
        self._say(f"candidate {item} {status}: {message}")
        if status == "timeout":
            self._skip_siblings(item)

    def _say(self, message: str) -> None:
        print(f"measure: {message}", file=self.log or sys.stderr, flush=True)

    def _skip_siblings(self, item: str) -> None:
        """A kernel that hung under one set of run-time arguments is not run under the others: each would wait out
        the whole time limit again (the variants of one build share its code; a hang is the code's)."""
        by_id = {c.id: c for c in self.request.candidates}
        hung = by_id[item]
        for cid in self.pending():
            if by_id[cid].library == hung.library:
                self.results[cid] = {"id": cid, "status": "skipped",
                                     "message": f"not run: its kernel {hung.symbols} hung as candidate {item}"}

    def result(self) -> dict:
        p = self.request.problem
        case = case_for(self.request.family, p)
        tol = case.tolerance()
        candidates = []
        for c in self.request.candidates:
            r = dict(self.results[c.id])
            for key in ("ms", "rel_err", "max_abs_err", "max_err_vs_peak", "message"):
                r.setdefault(key, None)
            r.setdefault("tolerance", tol)
            r["library"] = c.library
            candidates.append(r)
        baseline = self.baseline
        fp32_err = None
        if baseline is not None:
            baseline = dict(baseline)
            fp32_err = baseline.pop("fp32_reference_err", None)
        return {
            "device": self.env.get("device"), "torch": self.env.get("torch"), "cuda": self.env.get("cuda"),
            "environment": self.env,
            "problem": p.to_json(),
            "baseline": baseline,
            "fp32_reference_err": fp32_err,
            "candidates": candidates,
            "tolerances": {"applied": tol, "numerics": p.numerics, **case.tolerance_table()},
            "settings": {k: v for k, v in self.request.to_json().items() if k not in ("problem", "candidates")},
            "error": self.fatal,
        }


def write_json(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    tmp.replace(path)


def summary(result: dict) -> str:
    rows = [f"{'candidate':<32} {'status':<16} {'ms':>10} {'rel_err':>10}"]
    b = result.get("baseline")
    if b:
        rows.append(f"{'[baseline] ' + str(b.get('precision', '')):<32} {b.get('status', ''):<16} "
                    f"{fmt(b.get('ms')):>10} {fmt(b.get('rel_err')):>10}")
    for c in result["candidates"]:
        rows.append(f"{c['id'][:32]:<32} {c['status']:<16} {fmt(c.get('ms')):>10} {fmt(c.get('rel_err')):>10}")
    return "\n".join(rows)


def fmt(x) -> str:
    return "-" if x is None else f"{x:.4g}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fact.realize.measure",
                                 description="Verify and time kernel candidates against PyTorch.")
    ap.add_argument("request", nargs="?", help="request JSON (problem, candidates, trials, baseline, warmup_ms, rep_ms)")
    ap.add_argument("-o", "--output", help="where to write the result JSON (required with a request)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no summary table on stdout")
    ap.add_argument("--prewarm", action="store_true",
                    help="start a measuring worker for the next request in this process (it imports torch meanwhile) "
                         "and return")
    args = ap.parse_args(argv)
    if args.prewarm:
        if args.request:
            ap.error("--prewarm takes no request")
        reason = cuda_unavailable_reason()
        if reason:
            print(f"measure: no worker started ahead: {reason}", file=sys.stderr)
            return EXIT_NO_GPU
        print("measure: a worker was started ahead of the next request" if prewarm()
              else "measure: the worker started ahead is still waiting")
        return EXIT_OK
    if not args.request or not args.output:
        ap.error("a request JSON and -o RESULT.json are required")
    try:
        request = load_request(args.request)
    except RequestError as e:
        print(f"measure: bad request: {e}", file=sys.stderr)
        return EXIT_BAD_REQUEST
    reason = cuda_unavailable_reason()
    if reason:
        print(f"measure: a CUDA GPU is required to verify and time kernels: {reason}", file=sys.stderr)
        return EXIT_NO_GPU
    result = Orchestrator(request).run()
    write_json(Path(args.output), result)
    if not args.quiet:
        print(summary(result))
    if result["error"]:
        print(f"measure: {result['error']}", file=sys.stderr)
        return EXIT_WORKER_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
