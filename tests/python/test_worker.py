"""fact.worker: the long-lived Python of a `fact` process. Requests run a module's main(argv) with its output in
the request's files; every outcome is an answer; Python children are counted and reported back."""
import io
import json
import os
import subprocess
import sys

import pytest

from fact import worker
from conftest import PYTHON_DIR


def request(tmp_path, rid, module, argv=()):
    return {"id": rid, "module": module, "argv": list(argv), "stdout": str(tmp_path / f"{rid}.out"),
            "stderr": str(tmp_path / f"{rid}.err")}


def serve(lines, run, tally=None):
    replies = io.StringIO()
    assert worker.serve(io.StringIO("".join(line + "\n" for line in lines)), replies, run=run, tally=tally) == 0
    return [json.loads(line) for line in replies.getvalue().splitlines()]


def test_each_request_runs_its_module_with_its_output_in_its_files(tmp_path):
    def fake(module, argv):
        print(f"out of {module} {argv}")
        print("a note", file=sys.stderr)
        os.system("echo from a child")  # fd 1 is the request's file, for children too
        if argv == ["exit"]:
            raise SystemExit(4)
        if argv == ["boom"]:
            raise RuntimeError("a bug in the module")
        return 0

    lines = [json.dumps(request(tmp_path, 1, "fact.trace", ["a.py"])),
             json.dumps(request(tmp_path, 2, "fact.compose.e2e_check", ["exit"])),
             json.dumps(request(tmp_path, 3, "fact.compose.report_chart", ["boom"]))]
    ready, first, second, third = serve(lines, fake)
    assert ready["ready"] is True and ready["pid"] == os.getpid()
    assert (first["id"], first["exit_code"], first["restart"]) == (1, 0, False)
    assert (tmp_path / "1.out").read_text() == "out of fact.trace ['a.py']\nfrom a child\n"
    assert (tmp_path / "1.err").read_text() == "a note\n"
    assert second["exit_code"] == 4
    assert third["exit_code"] == 1 and "RuntimeError: a bug in the module" in (tmp_path / "3.err").read_text()


def test_bad_requests_are_answered_not_fatal(tmp_path):
    def never(module, argv):
        raise AssertionError("not to be run")

    answers = serve(["not json", json.dumps(request(tmp_path, 7, "os")),
                     json.dumps({"id": 8, "module": "fact.trace", "argv": "a.py"})], never)[1:]
    assert [a["exit_code"] for a in answers] == [2, 2, 2]
    assert "bad request line" in answers[0]["error"]
    assert answers[1]["id"] == 7 and "'os' is not one the worker runs" in answers[1]["error"]
    assert "argv must be a list" in answers[2]["error"]


def test_python_children_are_counted_by_use(tmp_path, monkeypatch):
    tally = worker.ChildTally()
    monkeypatch.setattr(subprocess, "Popen", subprocess.Popen)  # restored after the test
    tally.install()

    def starts_children(module, argv):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        subprocess.run([sys.executable, "-m", "json.tool", "--help"], capture_output=True)
        subprocess.run(["true"], check=True)  # not a Python
        return 0

    _, first, second = serve([json.dumps(request(tmp_path, 1, "fact.realize.measure")),
                              json.dumps(request(tmp_path, 2, "fact.trace"))],
                             lambda m, a: starts_children(m, a) if m == "fact.realize.measure" else 0, tally)
    assert first["python_children"] == {"python -c": 1, "json.tool": 1}
    assert second["python_children"] == {}


def test_python_use_names_what_a_python_child_runs():
    assert worker.python_use([sys.executable, "-m", "fact.realize.measure_worker", "job.json"]) == \
        "fact.realize.measure_worker"
    assert worker.python_use(["/usr/bin/python3.11", "script.py"]) == "script.py"
    # torch.compile's compile-worker pool (torch/_inductor/compile_worker/subproc_pool.py)
    assert worker.python_use([sys.executable, "/x/torch/_inductor/compile_worker/__main__.py", "--workers=8"]) == \
        "compile_worker/__main__.py"
    assert worker.python_use("python -c 'print(1)'") == "python -c"
    assert worker.python_use(["nvcc", "-c", "x.cu"]) is None
    assert worker.python_use([]) is None


def test_the_real_worker_answers_over_pipes(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR)}
    proc = subprocess.Popen([sys.executable, "-m", "fact.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert json.loads(proc.stdout.readline())["ready"] is True
        proc.stdin.write(json.dumps(request(tmp_path, 1, "fact.environment", ["--cutlass"])) + "\n")
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        assert reply["id"] == 1 and reply["exit_code"] == 0, (tmp_path / "1.err").read_text()
        assert "cutlass_dir" in json.loads((tmp_path / "1.out").read_text())
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0  # end of requests: the worker exits
    finally:
        if proc.poll() is None:
            proc.kill()
