"""A stand-in for `python -m fact.worker` in the C++ client's tests: the same protocol, with modules that answer,
crash, hang, report children or ask for a restart. `--one-shot MODULE ARGS...` plays a one-shot `python -m` run."""
import json
import os
import signal
import sys
import time

if sys.argv[1:2] == ["--one-shot"]:
    print("one-shot", " ".join(sys.argv[2:]))
    sys.exit(0)

replies = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
print("fake worker starting", file=sys.stderr, flush=True)
replies.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
for line in sys.stdin:
    req = json.loads(line)
    module, argv = req["module"], req["argv"]
    with open(req["stdout"], "w") as out, open(req["stderr"], "w") as err:
        answer = {"id": req["id"], "exit_code": 0, "python_children": {}, "restart": False, "error": None}
        if module == "echo":
            out.write(" ".join(argv) + "\n")
            err.write("a note\n")
        elif module == "exit3":
            answer["exit_code"] = 3
        elif module == "crash":
            err.write("about to crash\n")
            err.flush()
            print("last words of the worker", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)
        elif module == "hang":
            time.sleep(60)
        elif module == "children":
            answer["python_children"] = {"fake.child": 2}
        elif module == "restart":
            answer["restart"] = True
        elif module == "quit":  # answers, then ends without being asked to
            answer["quit"] = True
        else:
            answer.update(exit_code=2, error=f"unknown module {module}")
    replies.write(json.dumps(answer) + "\n")
    if answer["restart"] or answer.get("quit"):
        sys.exit(0)
