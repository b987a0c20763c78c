"""fact.trace's command line, without torch: the trace cache (fact.trace_cache) reads the same arguments to key the IR
before deciding whether torch is needed at all."""
from __future__ import annotations

import argparse
from pathlib import Path

USAGE = "Trace a KernelBench-format problem file to a FACT IR file (docs/ir-format.md)."


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m fact.trace", description=USAGE)
    parser.add_argument("model", type=Path, help="KernelBench-format problem file (Model, get_inputs, get_init_inputs)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="IR JSON file to write")
    parser.add_argument("--device", choices=["meta", "cpu"], default=None,
                        help="device to build the model on (default: meta, falling back to cpu)")
    parser.add_argument("--verbose", action="store_true", help="let torch's own warnings and logs through to stderr")
    return parser.parse_args(argv)


def ir_options(args: argparse.Namespace) -> list[str]:
    """The arguments the IR depends on besides the model (not the output path, not --verbose)."""
    return ["--device", args.device] if args.device else []
