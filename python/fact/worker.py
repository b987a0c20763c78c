"""`python -m fact.worker`: the one long-lived Python of a `fact` process (src/core/python_worker.cpp).

Starting Python and importing torch costs seconds, and `fact optimize` needs Python for tracing, the CUDA check,
measuring, the op library build, the end-to-end check and the chart: each request runs one of the FACT modules
below as `python -m MODULE ARGV...` would (its main(argv)), in this one process. What a module prints goes to
the files the request names, so the protocol stream stays clean. A kernel that may crash still runs in a child:
measuring starts its own worker per candidate batch (measure.py); such Python children are counted and reported
back with each answer, so `fact` can say how often Python was started.

Protocol, one JSON object per line:
  started:   {"ready": true, "pid": N, "python": "3.11.7"}                         (on the original stdout)
  request:   {"id": N, "module": "fact.trace", "argv": [...], "stdout": PATH, "stderr": PATH}   (on stdin)
  answer:    {"id": N, "exit_code": 0, "seconds": 1.2, "python_children": {"fact.realize.measure_worker": 1},
              "restart": false, "error": null}
"restart": true means this process left the CUDA context unusable (a kernel's sticky error) and exits after the
answer; the client starts a fresh one. End of stdin: exit 0.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
import traceback
from typing import Callable, TextIO

# The modules a request may run: each has main(argv) -> exit status, as under `python -m`.
MODULES = (
    "fact.environment",
    "fact.trace",
    "fact.trace_cache",
    "fact.realize.measure",
    "fact.realize.op_library_build",
    "fact.compose.e2e_check",
    "fact.compose.report_chart",
    "fact.bench.suite_chart",
)

RunModule = Callable[[str, list], int]


def run_main(module: str, argv: list) -> int:
    """The module's main(argv), as `python -m module argv...` runs it."""
    return importlib.import_module(module).main(argv)


def exit_status(e: SystemExit) -> int:
    if e.code is None:
        return 0
    return e.code if isinstance(e.code, int) else 1


# --- Counting the Python children a request starts -----------------------------------------------------------

PYTHON_NAME = re.compile(r"python[0-9.]*$")


def python_use(args, executable=None) -> str | None:
    """What a child runs if it is a Python ("fact.realize.measure_worker", "python -c", the script), else None."""
    argv = shlex.split(os.fsdecode(args)) if isinstance(args, (str, bytes)) else [os.fsdecode(a) for a in args]
    if not argv:
        return None
    program = os.fsdecode(executable) if executable else argv[0]
    is_python = PYTHON_NAME.match(os.path.basename(program)) is not None
    try:
        is_python = is_python or os.path.realpath(program) == os.path.realpath(sys.executable)
    except OSError:
        pass
    if not is_python:
        return None
    for i, a in enumerate(argv[1:-1], start=1):
        if a == "-m":
            return argv[i + 1]
        if a == "-c":
            return "python -c"
    if len(argv) < 2:
        return "python"
    # A package's __main__.py (torch.compile's compile-worker pool starts one) is named by its folder.
    script = os.path.normpath(argv[1])
    return os.path.join(os.path.basename(os.path.dirname(script)), "__main__.py") \
        if os.path.basename(script) == "__main__.py" else os.path.basename(script)


class ChildTally:
    """Counts the Python processes started through subprocess.Popen (subprocess.run uses it too) by use."""

    def __init__(self):
        self.by_use: dict[str, int] = {}

    def note(self, args, executable=None) -> None:
        use = python_use(args, executable)
        if use:
            self.by_use[use] = self.by_use.get(use, 0) + 1

    def take(self) -> dict[str, int]:
        taken, self.by_use = self.by_use, {}
        return taken

    def install(self) -> None:
        tally, base = self, subprocess.Popen

        class CountingPopen(base):  # type: ignore[misc, valid-type]
            def __init__(self, args, *rest, **kwargs):
                super().__init__(args, *rest, **kwargs)
                tally.note(args, kwargs.get("executable"))

        subprocess.Popen = CountingPopen  # type: ignore[misc]


# --- Requests ------------------------------------------------------------------------------------------------

def cuda_context_lost() -> bool:
    """True when a request left this process's CUDA context unusable (a sticky error): nothing more can run here.
    Frees the cached GPU memory otherwise, so children started later (measuring) find it."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return False
    try:
        torch.cuda.synchronize()
        usable = float(torch.ones(16, device="cuda").sum().item()) == 16.0
        torch.cuda.empty_cache()
        return not usable
    except Exception:  # noqa: BLE001 - any failure here means the context is gone
        return True


class Redirected:
    """Points file descriptors 1 and 2 (and sys.stdout/stderr) at the request's files while it runs, so what the
    module and its children print is the request's output."""

    def __init__(self, stdout_path: str, stderr_path: str):
        self.paths = (stdout_path, stderr_path)

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.saved = (os.dup(1), os.dup(2))
        for fd, path in zip((1, 2), self.paths):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        # Python's own streams may be anything (a test's capture): during the request they write to fds 1 and 2.
        self.streams = (sys.stdout, sys.stderr)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        return self

    def __exit__(self, *exc):
        for stream in (sys.stdout, sys.stderr):
            stream.close()
        sys.stdout, sys.stderr = self.streams
        for fd, saved in zip((1, 2), self.saved):
            os.dup2(saved, fd)
            os.close(saved)
        return False


def answer(request: dict, run: RunModule, tally: ChildTally) -> dict:
    """Runs one request; every outcome, a module's crash with a Python exception included, is an answer."""
    rid = request.get("id")
    module, argv = request.get("module"), request.get("argv", [])
    if module not in MODULES:
        return {"id": rid, "exit_code": 2, "error": f"module {module!r} is not one the worker runs ({', '.join(MODULES)})"}
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return {"id": rid, "exit_code": 2, "error": "argv must be a list of strings"}
    if not isinstance(request.get("stdout"), str) or not isinstance(request.get("stderr"), str):
        return {"id": rid, "exit_code": 2, "error": "stdout and stderr must name the files for the module's output"}
    t0 = time.perf_counter()
    tally.take()
    with Redirected(request["stdout"], request["stderr"]):
        try:
            code = run(module, argv)
            code = 0 if code is None else int(code)
        except SystemExit as e:
            code = exit_status(e)
        except Exception:  # noqa: BLE001 - a bug in a module: its traceback is the request's output
            traceback.print_exc()
            code = 1
    return {"id": rid, "exit_code": code, "seconds": round(time.perf_counter() - t0, 3),
            "python_children": tally.take(), "restart": cuda_context_lost(), "error": None}


def serve(requests: TextIO, replies: TextIO, run: RunModule = run_main, tally: ChildTally | None = None) -> int:
    tally = tally or ChildTally()

    def reply(obj: dict) -> None:
        replies.write(json.dumps(obj) + "\n")
        replies.flush()

    reply({"ready": True, "pid": os.getpid(), "python": sys.version.split()[0]})
    for line in requests:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("not a JSON object")
        except ValueError as e:
            reply({"id": None, "exit_code": 2, "error": f"bad request line ({e}): {line[:200]}"})
            continue
        result = answer(request, run, tally)
        reply(result)
        if result.get("restart"):
            return 0
    return 0


def main() -> int:
    # The protocol keeps the original stdout; fd 1 then points at stderr, so nothing a module prints between
    # requests (or a library at import) can corrupt it.
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    tally = ChildTally()
    tally.install()
    return serve(sys.stdin, replies, tally=tally)


if __name__ == "__main__":
    sys.exit(main())
