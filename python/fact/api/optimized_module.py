"""What fact.optimize returns: the user's own module, whose calls shaped as the traced one run the composed graph
with FACT's kernels (model_new.py's _replay) reading the module's parameters and buffers in place (no copy: an
update to a parameter is seen by the next call); any other call runs the module's own forward."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import torch

from fact.api.results import Report


def load_composed(folder: Path) -> ModuleType:
    """A composed folder's model_new.py as a module of its own (one per folder, so two never share globals)."""
    name = "fact_composed_" + hashlib.sha1(str(folder.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, folder / "model_new.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


class OptimizedModule(torch.nn.Module):
    """`original` is the module given to fact.optimize (its parameters, buffers and state_dict are the original's,
    under `original.`); `report` is the run's report; `composed_dir` the verified composed module (None when the
    whole module stayed PyTorch's)."""

    def __init__(self, original: torch.nn.Module, composed_dir: Path | None, report: Report):
        super().__init__()
        self.original = original
        self.report = report
        self.composed_dir = composed_dir
        graph = load_composed(composed_dir) if composed_dir is not None else None
        # Without an accepted FACT op the composed module runs the original forward: so does this one.
        self._graph = graph if graph is not None and graph._CALL is not None else None

    @property
    def uses_fact_ops(self) -> bool:
        return self._graph is not None

    def forward(self, *args, **kwargs):
        flat = self._graph._traced_call(args, kwargs) if self._graph is not None else None
        # FACT's kernels are CUDA kernels: a call on another device runs the original forward (unless the ops are
        # the PyTorch references, FACT_REFERENCE_OPS=1, as model_new.py loads them).
        on_device = os.environ.get("FACT_REFERENCE_OPS") == "1" or all(
            v.is_cuda for v in flat or () if isinstance(v, torch.Tensor))
        if flat is None or not on_device:
            return self.original(*args, **kwargs)
        # One CUDA graph a call where the end-to-end check chose it (the composed folder's replay.json), as ModelNew.
        return self._graph._run(self, self.original, flat, self._graph.ModelNew.fact_cuda_graphs)

    def extra_repr(self) -> str:
        ops = self.report.fact_ops
        return f"fact_ops={len(ops)}" + (f" ({', '.join(ops)})" if ops else "")
