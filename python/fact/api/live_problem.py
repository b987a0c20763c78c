"""A live module as a problem folder that FACT's stages read as they read a KernelBench file: torch.export's program
of it (program.pt2), its example call (example_inputs.pt), and model.py rendered from
templates/compose/live_model.py.in (class Model, get_inputs, get_init_inputs). The folder's name carries the
program's identity, so a second call for the same graph and shapes finds the first one's results."""
from __future__ import annotations

import hashlib
import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from fact.api.core import FactError, call
from fact.problem import first_line

MODEL_FILE = "model.py"


def example_arguments(example_inputs) -> tuple:
    """forward's positional arguments from what the user passed: one tensor, or a tuple or list of arguments."""
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs)
    if isinstance(example_inputs, dict):
        raise FactError("example_inputs is a dict: pass forward's arguments as a tuple, in forward's order "
                        "(keyword arguments are not supported yet)")
    raise FactError(f"example_inputs must be a tensor or a tuple of forward's arguments, got "
                    f"{type(example_inputs).__name__}")


@dataclass
class LiveProblem:
    folder: Path
    program: torch.export.ExportedProgram | None  # None: torch.export cannot trace the module
    args: tuple
    untraceable: str = ""                          # why, when program is None
    # Per argument: checks use its example value, not fresh random ones (a Dynamo graph's parameters and buffers:
    # a causal mask buffer drawn at random is no mask).
    keep: tuple = ()

    @property
    def model_file(self) -> Path:
        return self.folder / MODEL_FILE


def program_key(program: torch.export.ExportedProgram, args: tuple, settings: dict) -> str:
    """The graph, its signature, the call's shapes, dtypes and devices, torch's version and FACT's settings (the
    arguments kept as they are among them)."""
    h = hashlib.sha256()
    h.update(program.graph_module.print_readable(print_output=False).encode())
    h.update(str(program.graph_signature).encode())
    for a in args:
        h.update(repr((tuple(a.shape), a.dtype, a.device.type) if isinstance(a, torch.Tensor) else a).encode())
    h.update(json.dumps({"torch": torch.__version__, **settings}, sort_keys=True).encode())
    return h.hexdigest()[:20]


def export(model: torch.nn.Module, args: tuple, cache_dir: Path, settings: dict, keep: tuple = ()) -> LiveProblem:
    """Exports the module; a module torch.export cannot trace is no error: it stays PyTorch's, with the reason."""
    if not isinstance(model, torch.nn.Module):
        raise FactError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if model.training and not isinstance(model, torch.fx.GraphModule):  # a traced graph has no modes
        warnings.warn(f"{type(model).__name__} is in training mode: FACT optimizes inference, so call .eval() "
                      f"first (dropout and batch statistics stay PyTorch's as traced)", stacklevel=3)
    name = type(model).__name__
    try:
        program = torch.export.export(model, args)
    except Exception as e:  # noqa: BLE001 - any failure of torch.export leaves the module to PyTorch
        why = f"torch.export cannot trace {name}.forward: {first_line(e)}"
        return LiveProblem(cache_dir / f"{name}-untraceable", None, args, why, keep)
    key = program_key(program, args, {**settings, "keep": [i for i, k in enumerate(keep) if k]})
    return LiveProblem(cache_dir / f"{name}-{key}", program, args, keep=keep)


def spec_modules(program: torch.export.ExportedProgram) -> list[str]:
    """The modules defining the pytree types of forward's arguments and result (a Hugging Face ModelOutput):
    loading the program in another process needs them imported first."""
    found, stack = set(), [program.call_spec.in_spec, program.call_spec.out_spec]
    while stack:
        spec = stack.pop()
        if spec is None:
            continue
        if spec.type is not None and spec.type.__module__ not in ("builtins", "collections"):
            found.add(spec.type.__module__)
        stack.extend(spec.children())
    return sorted(found)


def write(problem: LiveProblem, module_class: str) -> None:
    """program.pt2, example_inputs.pt and model.py in the problem's folder (written afresh)."""
    problem.folder.mkdir(parents=True, exist_ok=True)
    torch.export.save(problem.program, problem.folder / "program.pt2")
    keep = [bool(k) for k in problem.keep] or [False] * len(problem.args)
    torch.save({"args": list(problem.args), "keep": keep}, problem.folder / "example_inputs.pt")
    text = call("render_template", "compose/live_model.py.in",
                {"module_class": module_class, "problem_dir": json.dumps(str(problem.folder.resolve())),
                 "spec_modules": json.dumps(spec_modules(problem.program))})
    problem.model_file.write_text(text)
