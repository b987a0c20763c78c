"""`fact agent --agent llm` against a local scripted OpenAI-compatible server (scripted_llm_server.py):
malformed and wrong-schema replies are sent back and recovered from, a kernel that does not compile is
followed by one that does (real nvcc), time-outs are retried, endpoint errors stop with a clear message,
the API key never reaches the transcript, and the registry stays empty without a verified kernel."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FACT_BIN = Path(os.environ.get("FACT_BIN", REPO_ROOT / "build" / "fact"))
PROBLEM = REPO_ROOT / "bench" / "problems" / "level2" / "swish_absmax_rows.py"
REPLIES = REPO_ROOT / "bench" / "scripts" / "agent_replies"
SERVER = Path(__file__).resolve().parent / "scripted_llm_server.py"
GOOD_PLAN = json.loads((Path(__file__).resolve().parent / "data" / "agent" / "good_plan.json").read_text())
SECRET = "sk-test-secret-4242"

pytestmark = pytest.mark.skipif(not FACT_BIN.exists(), reason=f"fact binary not built at {FACT_BIN}")


def cuda_available() -> bool:
    import torch
    return torch.cuda.is_available()


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan") / "plan.json"
    r = subprocess.run([str(FACT_BIN), "discover", str(PROBLEM), "--json", str(out)], capture_output=True, text=True,
                       cwd=REPO_ROOT, timeout=300, env={**os.environ, "FACT_REGISTRY": str(out.parent / "empty")})
    assert r.returncode == 0, r.stderr
    return out


class Server:
    def __init__(self, tmp_path: Path, replies: list):
        script = tmp_path / "script.json"
        script.write_text(json.dumps({"replies": replies}))
        self.log = tmp_path / "requests.jsonl"
        port_file = tmp_path / "port"
        self.proc = subprocess.Popen([sys.executable, str(SERVER), str(script), "--port-file", str(port_file),
                                      "--log", str(self.log)])
        for _ in range(100):
            if port_file.exists():
                break
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{port_file.read_text()}/v1"

    def requests(self) -> list:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def stop(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def server(tmp_path):
    made = []

    def start(replies):
        s = Server(tmp_path, replies)
        made.append(s)
        return s
    yield start
    for s in made:
        s.stop()


def run_agent(plan, url, out, registry, *extra, timeout=600):
    env = {**os.environ, "FACT_REGISTRY": str(registry), "OPENAI_API_KEY": SECRET}
    return subprocess.run([str(FACT_BIN), "agent", str(plan), "--agent", "llm", "--endpoint", url, "--model", "scripted",
                           "--out", str(out), *extra], capture_output=True, text=True, cwd=REPO_ROOT, timeout=timeout,
                          env=env)


def kernel_reply(name: str, notes: str) -> dict:
    return {"tool": "submit_kernel", "source_from": str(REPLIES / name), "arguments": {"notes": notes}}


@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(), reason="needs nvcc")
@pytest.mark.skipif(cuda_available(), reason="checks the CPU machine's stop at verification; this machine has a GPU")
def test_recovers_from_bad_plans_and_a_compile_error_then_stops_unverified(tmp_path, plan, server):
    s = server([
        {"content": "Sure! The plan is {patterns: [swish]}"},                                    # malformed JSON
        {"tool": "propose_patterns", "arguments": {"patterns": [{"name": "swish_absmax_rows", "nodes": ["div"]}]}},
        GOOD_PLAN,
        kernel_reply("broken.cu", "first version"),                                            # nvcc error
        kernel_reply("simple.cu", "declared the block reduction"),                             # compiles
    ])
    out, registry = tmp_path / "out", tmp_path / "registry"
    r = run_agent(plan, s.url, out, registry)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "the agent stopped before it finished" in r.stderr
    report = json.loads((out / "agent.json").read_text())
    lines = "\n".join(report["lines"])
    assert "plan reply 1 unusable: the reply content is not valid JSON" in lines
    assert "missing the required field 'reason'" in lines
    assert "cannot be verified on this machine: no CUDA GPU" in lines
    history = report["details"]["patterns"][0]["history"]
    assert [h["outcome"] for h in history] == ["compile_error", "no_gpu"]
    assert "block_reduce_max" in history[0]["message"]
    # The compiler's error went back to the LLM in the next request, as a tool result.
    reqs = s.requests()
    assert len(reqs) == 5
    last = reqs[4]["body"]["messages"][-1]
    assert last["role"] == "tool" and "block_reduce_max" in last["content"] and "nvcc rejected" in last["content"]
    # Schema-forced tool calls; key only in the Authorization header, never in the transcript.
    assert reqs[0]["body"]["tool_choice"]["function"]["name"] == "propose_patterns"
    assert reqs[3]["body"]["tool_choice"]["function"]["name"] == "submit_kernel"
    assert all(q["authorization"] == f"Bearer {SECRET}" for q in reqs)
    transcript = (out / "transcript.jsonl").read_text()
    assert SECRET not in transcript and len(transcript.splitlines()) == 10
    assert not registry.exists() or not any(registry.iterdir())


def test_retries_a_timeout_and_stops_after_unusable_kernel_replies(tmp_path, plan, server):
    s = server([
        dict(GOOD_PLAN, delay=4),                                  # exceeds --request-timeout 2: retried
        GOOD_PLAN,
        {"tool": "submit_kernel", "arguments": {"notes": "no source"}},
        {"tool": "submit_kernel", "arguments_raw": "{\"source\": \"unterminated"},
        {"tool": "submit_kernel", "arguments": {"source": "__global__ void k() {}", "notes": "no entry point"}},
    ])
    out, registry = tmp_path / "out", tmp_path / "registry"
    r = run_agent(plan, s.url, out, registry, "--request-timeout", "2", "--retries", "1")
    assert r.returncode == 1
    report = json.loads((out / "agent.json").read_text())
    outcome = report["details"]["patterns"][0]
    assert outcome["verified"] is False and "3 unusable replies in a row" in outcome["stop_reason"]
    assert "fact_swish_absmax_rows_run" in outcome["stop_reason"]
    entries = [json.loads(line) for line in (out / "transcript.jsonl").read_text().splitlines()]
    timeouts = [e for e in entries if e.get("response") == 1 and e["attempt"] == 0]
    assert timeouts and "error" in timeouts[0] and timeouts[0]["status"] == 0
    assert not registry.exists() or not any(registry.iterdir())


@pytest.mark.parametrize("replies,expected", [
    ([{"status": 401, "body": "{\"error\": \"bad key\"}"}], "answered HTTP 401"),
    ([dict(GOOD_PLAN, delay=3)] * 2, "no usable reply after 2 attempts: no reply within 1 s"),
    ([{"status": 503}] * 2, "no usable reply after 2 attempts: HTTP 503"),
])
def test_endpoint_failures_stop_with_a_clear_message(tmp_path, plan, server, replies, expected):
    s = server(replies)
    r = run_agent(plan, s.url, tmp_path / "out", tmp_path / "registry", "--request-timeout", "1", "--retries", "1")
    assert r.returncode == 1
    assert expected in (tmp_path / "out" / "agent.md").read_text()
    assert SECRET not in (tmp_path / "out" / "transcript.jsonl").read_text()


def test_optimize_llm_needs_endpoint_and_model(tmp_path):
    r = subprocess.run([str(FACT_BIN), "optimize", str(PROBLEM), "--agent", "llm", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert r.returncode != 0 and "--endpoint URL and --model NAME" in r.stderr


def test_registry_cli_on_an_empty_registry(tmp_path):
    env = {**os.environ, "FACT_REGISTRY": str(tmp_path / "reg")}
    r = subprocess.run([str(FACT_BIN), "registry", "list"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and "(0 entries)" in r.stdout
    r = subprocess.run([str(FACT_BIN), "registry", "show", "nope"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1 and "no pattern 'nope'" in r.stderr and "it is empty" in r.stderr
