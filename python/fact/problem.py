"""Loading a KernelBench-format problem file and building its model and inputs on a device.

A problem file defines `class Model(nn.Module)`, `get_inputs()` (the forward arguments) and
`get_init_inputs()` (the constructor arguments). Every failure raises ProblemError with a message that
names the file, the line where Python points, and what to fix.
"""
from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

FORMAT_HINT = "a problem file defines class Model(nn.Module), get_inputs() and get_init_inputs()"


class ProblemError(Exception):
    """The problem file itself is at fault (missing, unparsable, incomplete, or it raised)."""


@dataclass
class Problem:
    path: Path
    sha256: str
    module: ModuleType
    model_class: type
    get_inputs: Callable[[], Any]
    get_init_inputs: Callable[[], Any]


def source_line(path: Path, exc: BaseException) -> int | None:
    """The innermost line of `path` in the exception's traceback: where the problem file went wrong."""
    line = None
    resolved = path.resolve()
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename and Path(frame.filename).resolve() == resolved:
            line = frame.lineno
    return line


def where(path: Path, exc: BaseException) -> str:
    line = source_line(path, exc)
    return f"{path}:{line}" if line is not None else str(path)


def first_line(exc: BaseException) -> str:
    """The exception's type and first non-empty message line: one line a person can act on."""
    for text in str(exc).splitlines():
        if text.strip():
            return f"{type(exc).__name__}: {text.strip()}"
    return type(exc).__name__


def import_file(path: Path) -> ModuleType:
    if not path.exists():
        raise ProblemError(f"{path}: file not found")
    if not path.is_file():
        raise ProblemError(f"{path}: not a file ({FORMAT_HINT})")
    # A unique module name per file, so two problems with the same stem never share a sys.modules entry.
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    name = f"fact_problem_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(f"{path}: cannot be imported as a Python module (expected a .py file)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        sys.modules.pop(name, None)
        raise ProblemError(f"{path}:{e.lineno}: syntax error: {e.msg}; fix the file so Python can parse it") from e
    except Exception as e:
        sys.modules.pop(name, None)
        raise ProblemError(f"{where(path, e)}: importing the file raised {first_line(e)}") from e
    return module


def load_problem(path: str | Path) -> Problem:
    path = Path(path)
    module = import_file(path)

    model_class = getattr(module, "Model", None)
    if model_class is None:
        raise ProblemError(f"{path}: no class `Model` defined ({FORMAT_HINT})")
    import torch.nn as nn  # after the file imported: keeps `load_problem` errors for missing files fast

    if not (isinstance(model_class, type) and issubclass(model_class, nn.Module)):
        raise ProblemError(f"{path}: `Model` is not a subclass of torch.nn.Module ({FORMAT_HINT})")
    for fn in ("get_inputs", "get_init_inputs"):
        if not hasattr(module, fn):
            raise ProblemError(f"{path}: no function `{fn}` defined ({FORMAT_HINT})")
        if not callable(getattr(module, fn)):
            raise ProblemError(f"{path}: `{fn}` is not a function ({FORMAT_HINT})")

    return Problem(
        path=path,
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        module=module,
        model_class=model_class,
        get_inputs=module.get_inputs,
        get_init_inputs=module.get_init_inputs,
    )


def call_list(problem: Problem, fn_name: str) -> list:
    fn = getattr(problem, fn_name)
    try:
        values = fn()
    except Exception as e:
        raise ProblemError(f"{where(problem.path, e)}: {fn_name}() raised {first_line(e)}") from e
    if not isinstance(values, (list, tuple)):
        raise ProblemError(f"{problem.path}: {fn_name}() must return a list, got {type(values).__name__}")
    return list(values)


def instantiate(problem: Problem, device: str):
    """Builds (model, inputs, init_inputs) with every default-device tensor on `device`.

    Tensors are created under a torch.device context, so on "meta" no storage is allocated: an 8B-sized block
    costs nothing. The model is put in eval mode because FACT optimizes inference.
    """
    import torch

    torch.manual_seed(0)
    with torch.device(device):
        init_inputs = call_list(problem, "get_init_inputs")
        try:
            model = problem.model_class(*init_inputs)
        except Exception as e:
            raise ProblemError(
                f"{where(problem.path, e)}: Model(*get_init_inputs()) raised {first_line(e)}") from e
        model.eval()
        inputs = call_list(problem, "get_inputs")
    return model, inputs, init_inputs
