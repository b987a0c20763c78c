"""A local OpenAI-compatible Chat Completions server that replays scripted replies, in order, one per
POST to .../chat/completions. Used by tests/python/test_agent_llm.py and bench/scripts/agent_h100.sh.

    python tests/python/scripted_llm_server.py SCRIPT.json --port-file PORT [--log requests.jsonl]

SCRIPT.json: {"replies": [REPLY, ...]}; each REPLY is one of
  {"tool": NAME, "arguments": {...}}             a tool call (arguments serialized as JSON)
  {"tool": NAME, "arguments_raw": "text"}        a tool call whose arguments are the raw text (malformed JSON)
  {"content": "text"}                            a plain assistant message
  {"status": 500, "body": "..."}                 an HTTP error
and may add "delay": seconds (sleep before answering: time-out tests) and "source_from": "file.cu" (read
relative to the script, placed in arguments.source). Past the last reply: HTTP 500 "script exhausted".
The log records, per request, whether an Authorization header came and the request body.
"""
from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def make_handler(replies: list, base: Path, log_path: Path | None):
    lock = threading.Lock()
    state = {"next": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, status: int, body: str):
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (time-out test)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", 0))
            body = self.rfile.read(length).decode()
            with lock:
                i = state["next"]
                state["next"] += 1
            if log_path:
                with lock, open(log_path, "a") as f:
                    f.write(json.dumps({"index": i, "path": self.path, "authorization": self.headers.get("Authorization"),
                                        "body": json.loads(body)}) + "\n")
            if not self.path.endswith("/chat/completions"):
                return self._send(404, json.dumps({"error": f"no route {self.path}"}))
            if i >= len(replies):
                return self._send(500, json.dumps({"error": "script exhausted"}))
            r = replies[i]
            time.sleep(r.get("delay", 0))
            if "status" in r:
                return self._send(r["status"], r.get("body", json.dumps({"error": "scripted error"})))
            msg = {"role": "assistant", "content": r.get("content")}
            if "tool" in r:
                if "arguments_raw" in r:
                    args = r["arguments_raw"]
                else:
                    a = dict(r.get("arguments", {}))
                    if "source_from" in r:
                        a["source"] = (base / r["source_from"]).read_text()
                    args = json.dumps(a)
                msg["content"] = None
                msg["tool_calls"] = [{"id": f"call_{i}", "type": "function",
                                      "function": {"name": r["tool"], "arguments": args}}]
            resp = {"id": f"chatcmpl-{i}", "object": "chat.completion", "created": int(time.time()),
                    "model": json.loads(body).get("model", "scripted"),
                    "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if "tool" in r else "stop"}]}
            self._send(200, json.dumps(resp))

    return Handler


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("script")
    p.add_argument("--port-file", required=True)
    p.add_argument("--log")
    a = p.parse_args()
    script = Path(a.script)
    replies = json.loads(script.read_text())["replies"]
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(replies, script.parent, Path(a.log) if a.log else None))
    tmp = Path(a.port_file + ".tmp")
    tmp.write_text(str(server.server_address[1]))
    tmp.rename(a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
