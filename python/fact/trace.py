"""Trace a KernelBench-format problem file to a FACT IR file (docs/ir-format.md).

    python -m fact.trace MODEL.py -o IR.json [--device meta|cpu]

Without --device the model is built on the meta device (no memory is allocated, so an 8B-sized block traces on
any machine) and, if construction or export fails there, rebuilt with real CPU tensors; a note on stderr says so.
A module torch.export cannot trace (data-dependent control flow, Python it does not support) is not an error: the IR
then has no graph, `replay_blocker` names the module and the cause, a note on stderr says the same, and FACT leaves
the whole module to PyTorch. On failure the output file does not exist, stderr holds one line starting
`fact-trace: error: `, and the exit code is 2 when the problem file is at fault, 1 for anything else.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from fact.ir_encode import IR_FORMAT, IR_VERSION, encode_program, encode_value, forward_input_names, has_attribute_path
from fact.problem import Problem, ProblemError, first_line, instantiate, load_problem, where
from fact.trace_options import parse_args

PROG = "fact-trace"
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 1


class TraceError(Exception):
    """torch.export could not trace the module: the problem file is at fault."""


class OutputError(Exception):
    """The IR file could not be written: the environment is at fault, not the problem file."""


@dataclass
class Export:
    program: torch.export.ExportedProgram | None  # None: torch.export could not trace the module (see failure)
    init_inputs: list
    input_names: list[str] | None  # forward()'s names for the user inputs
    device: str
    meta_failure: str | None = None  # why tracing on meta failed, when it fell back to cpu
    model: torch.nn.Module | None = None
    failure: str | None = None  # why torch.export could not trace the module at all


def untraceable(device: str, why: str) -> Export:
    """The file is fine but torch.export cannot follow its forward: the module stays PyTorch's."""
    return Export(None, [], None, device, failure=why)


def export_on(problem: Problem, device: str, created_on_device: bool = True) -> Export:
    """created_on_device: tensors that forward() creates land on `device` too, as the inputs (else on PyTorch's
    default device: on meta, a constant forward makes from Python numbers then keeps its value)."""
    model, inputs, init_inputs = instantiate(problem, device)
    with torch.device(device) if created_on_device else contextlib.nullcontext():
        try:
            program = torch.export.export(model, tuple(inputs))
        except Exception as e:
            raise TraceError(f"{where(problem.path, e)}: torch.export cannot trace Model.forward: {first_line(e)}") from e
    return Export(program, init_inputs, forward_input_names(model, len(inputs)), device, model=model)


def valueless_constants(exported: Export) -> list[str]:
    """Tensor constants forward() makes (torch.tensor(self.value)) whose values a meta trace lost."""
    ep = exported.program
    return [name for name, value in ep.constants.items()
            if isinstance(value, torch.Tensor) and value.device.type == "meta"
            and not has_attribute_path(exported.model, name)]


def export_with_fallback(problem: Problem, device: str | None) -> Export:
    """`device` None means meta, then real CPU tensors if building or exporting on meta fails."""
    if device is not None:
        try:
            return export_on(problem, device)
        except TraceError as e:
            return untraceable(device, str(e))
    try:
        exported = export_on(problem, "meta")
        if valueless_constants(exported):
            # torch.tensor(number) in forward landed on meta, value and all: trace once more with forward's own
            # tensors made where PyTorch makes them (the composed module makes them again from their values).
            # torch.tensor(number, device=x.device) lands on meta either way: then on real CPU tensors.
            for device, own_device in (("meta", False), ("cpu", True)):
                try:
                    again = export_on(problem, device, created_on_device=own_device)
                    if not valueless_constants(again):
                        return again
                except (ProblemError, TraceError):
                    pass
        return exported
    except (ProblemError, TraceError) as meta_error:
        try:
            exported = export_on(problem, "cpu")
        except ProblemError as cpu_error:
            raise ProblemError(f"{cpu_error} (on meta and on cpu)") from cpu_error
        except TraceError as cpu_error:
            return untraceable("cpu", f"{cpu_error} (on meta and on cpu)")
        exported.meta_failure = str(meta_error)
        return exported


def build_document(problem: Problem, exported: Export) -> dict:
    document = {
        "format": IR_FORMAT,
        "version": IR_VERSION,
        "source": {"path": str(problem.path), "sha256": problem.sha256, "module_class": "Model"},
        "torch_version": torch.__version__,
        "trace_device": exported.device,
        "init_inputs": encode_value(exported.init_inputs),
    }
    if exported.program is None:
        return {**document, "replay_blocker": exported.failure, "nodes": [],
                "outputs": []}
    encoded = encode_program(exported.program, exported.input_names, exported.model)
    if encoded.replay_blocker:
        document["replay_blocker"] = encoded.replay_blocker
    if encoded.notes:
        document["notes"] = encoded.notes
    return {**document, "call": encoded.call, "nodes": encoded.nodes, "outputs": encoded.outputs}


def dumps(document: dict) -> str:
    """JSON with one node per line: small enough to diff, readable without a pretty-printer."""
    def one(value) -> str:
        return json.dumps(value, allow_nan=False)

    fields = []
    for key, value in document.items():
        if key == "nodes":
            text = "[\n  " + ",\n  ".join(one(node) for node in value) + "\n ]"
        else:
            text = one(value)
        fields.append(f" {one(key)}: {text}")
    return "{\n" + ",\n".join(fields) + "\n}\n"


def write_atomically(path: Path, document: dict) -> None:
    """Writes a temporary file beside `path` and renames it, so readers never see a partial IR."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(dumps(document))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def quiet_stderr(enabled: bool):
    """Silences torch's warnings and logs (they go to file descriptor 2) so a failure prints exactly one line."""
    if not enabled:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def trace(model_path: Path, out_path: Path, device: str | None, verbose: bool = False) -> None:
    problem = load_problem(model_path)
    with quiet_stderr(not verbose):
        exported = export_with_fallback(problem, device)
        document = build_document(problem, exported)
    if exported.failure:
        print(f"{PROG}: note: {' '.join(exported.failure.split())}; FACT leaves the whole module to PyTorch",
              file=sys.stderr)
    elif document.get("replay_blocker"):
        print(f"{PROG}: note: {document['replay_blocker']}; FACT leaves the whole module to PyTorch", file=sys.stderr)
    if exported.meta_failure:
        print(f"{PROG}: note: tracing on meta failed ({exported.meta_failure}); traced with real CPU tensors instead",
              file=sys.stderr)
    try:
        write_atomically(out_path, document)
    except OSError as e:
        raise OutputError(f"{model_path}: cannot write {out_path}: {e.strerror or e}") from e


def fail(message: str, code: int, out_path: Path) -> int:
    # A stale IR from an earlier run must not pass for the result of this one.
    try:
        out_path.unlink(missing_ok=True)
    except OSError:
        pass
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        trace(args.model, args.output, args.device, args.verbose)
    except (ProblemError, TraceError) as e:
        return fail(str(e), EXIT_BAD_INPUT, args.output)
    except OutputError as e:
        return fail(str(e), EXIT_INTERNAL, args.output)
    except Exception as e:  # a bug in the tracer, not in the problem file
        return fail(f"{args.model}: internal error while tracing: {first_line(e)}", EXIT_INTERNAL, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
