"""`python -m fact.trace_cache MODEL.py -o IR.json [--device D]`: fact.trace behind a cache of IR files.

A warm `fact optimize` should not pay for torch.export again: the IR of a problem file is kept under a key made of
everything the trace reads, and copied from there without importing torch. The key hashes the problem file and the
other .py files of its folder (a sibling it imports), FACT's tracer sources and data, the tracer's arguments, this Python
and every installed distribution's name and version (torch, and transformers or timm for a model built from them).
The cache is $FACT_TRACE_CACHE, else ~/.cache/fact/trace; FACT_TRACE_CACHE=off traces every time.
Exit codes and stderr are fact.trace's; a hit adds one note on stderr.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import sys
import tempfile
from pathlib import Path

from fact.paths import data_dir
from fact.trace_options import ir_options, parse_args

PROG = "fact-trace"
# What fact.trace runs and reads: a change to any of them is a different tracer.
TRACER_SOURCES = ("trace.py", "trace_options.py", "ir_encode.py", "decompose.py", "attention_masks.py", "problem.py")
TRACER_DATA = ("ir/aten_ops.json", "ir/pointwise_ops.json", "ir/trace_time_ops.json")


def cache_dir() -> Path | None:
    configured = os.environ.get("FACT_TRACE_CACHE", "")
    if configured.lower() in ("off", "0", "none"):
        return None
    return Path(configured) if configured else Path.home() / ".cache" / "fact" / "trace"


def trace_key(model: Path, options: list[str]) -> str:
    h = hashlib.sha256()

    def part(label: str, data: bytes) -> None:
        h.update(f"{label}:{len(data)}:".encode())
        h.update(data)

    model = model.resolve()
    part("model", model.read_bytes())
    for sibling in sorted(model.parent.glob("*.py")):
        if sibling != model:
            part("sibling " + sibling.name, sibling.read_bytes())
    package = Path(__file__).resolve().parent
    for name in TRACER_SOURCES:
        part("tracer " + name, (package / name).read_bytes())
    for name in TRACER_DATA:
        part("data " + name, (data_dir() / name).read_bytes())
    part("options", "\0".join(options).encode())
    part("python", f"{sys.version} {sys.executable}".encode())
    dists = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())
    part("distributions", "\n".join(dists).encode())
    return h.hexdigest()


def copy_atomically(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=dst.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)  # fact.trace's own parser: bad arguments fail here as they would there
    model, output = args.model, args.output
    where = cache_dir()
    key = None
    if where is not None and model.is_file():
        try:
            key = trace_key(model, ir_options(args))
        except OSError:
            key = None  # an unreadable sibling: trace without the cache
    cached = where / f"{key}.json" if key else None
    if cached is not None and cached.is_file():
        try:
            copy_atomically(cached, output)
            print(f"{PROG}: note: IR of {model} from the trace cache ({cached}); FACT_TRACE_CACHE=off traces again",
                  file=sys.stderr)
            return 0
        except OSError:
            pass  # an unreadable entry: trace
    from fact import trace  # imports torch: only on a miss

    code = trace.main(argv)
    if code == 0 and cached is not None:
        try:
            copy_atomically(output, cached)
        except OSError as e:  # a read-only cache costs the next run a trace, nothing else
            print(f"{PROG}: note: cannot keep the IR in the trace cache {where}: {e.strerror or e}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
