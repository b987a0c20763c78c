"""Registers reference implementations (PyTorch ops, on CPU and CUDA tensors) of a composed module's torch.ops.fact
ops, so the module runs without its op library (CPU machines, tests). A family's reference op is reference/<family>.py next to this file, with
reference_op(entry) -> (schema, implementation, key), key saying what the op computes (a GEMM's epilogue, a norm's
kind). This file and that folder ship with every composed module, where the fact package may be absent: the
family files are found by path, not by import, and need PyTorch only."""
import importlib.util
import json
import sys
import types
from pathlib import Path

import torch

_REFERENCE_DIR = Path(__file__).resolve().parent / "reference"
_families = {}       # family name -> its loaded reference/<family>.py

# A Library undoes its registrations when collected, and a composed module loads this file without keeping it:
# the Library objects and each op's key live in sys.modules, one per process as torch.ops.fact is, shared by every
# copy of this file (the fact package's, a composed folder's).
_STATE = sys.modules.get("fact_reference_ops_state")
if _STATE is None:
    _STATE = sys.modules["fact_reference_ops_state"] = types.ModuleType("fact_reference_ops_state")
    _STATE.libraries, _STATE.registered = [], {}  # op name -> key
_libraries, _registered = _STATE.libraries, _STATE.registered


def families():
    """The families with a reference op, sorted."""
    return sorted(p.stem for p in _REFERENCE_DIR.glob("*.py"))


def family_reference(family):
    """The module reference/<family>.py; ValueError naming the family and the file when there is none."""
    if family not in _families:
        path = _REFERENCE_DIR / f"{family}.py"
        if not _REFERENCE_DIR.is_dir():
            raise ValueError(f"{_REFERENCE_DIR} is missing: the reference ops of each family are there; copy the "
                             f"whole folder written by `fact compose`")
        if not (isinstance(family, str) and family.isidentifier() and path.is_file()):
            raise ValueError(f"family {family!r} has no reference op (no {path}); known: {', '.join(families())}")
        spec = importlib.util.spec_from_file_location(f"fact_reference_{family}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _families[family] = module
    return _families[family]


def register_reference_ops(manifest):
    """Registers a CPU and CUDA kernel for every accepted op of a composed module's manifest (a path or the loaded
    dict). Returns the op names. Raises ValueError naming the op when its family or its kind (epilogue, norm kind)
    has no reference, or when the same op was registered earlier computing something else."""
    if not isinstance(manifest, dict):
        path = Path(manifest)
        manifest = json.loads(path.read_text())
    if manifest.get("format") != "fact-composed-module":
        raise ValueError("not a composed-module manifest (format 'fact-composed-module'); pass DIR/manifest.json "
                         "written by `fact compose`")
    names = []
    for entry in manifest.get("accepted", []):
        name, family = entry["op"], entry.get("family")
        if not family:
            raise ValueError(f"op {name}: the manifest entry names no family; compose the module again")
        try:
            reference = family_reference(family)
        except ValueError as e:
            raise ValueError(f"op {name}: {e}") from None
        schema, impl, key = reference.reference_op(entry)
        if name in _registered:
            if _registered[name] != key:
                raise ValueError(f"op {name} is already registered as '{_registered[name]}', not '{key}'; "
                                 f"compose modules of one tuning database together")
            names.append(name)
            continue
        lib = torch.library.Library("fact", "FRAGMENT")
        lib.define(name + schema)
        lib.impl(name, impl, "CPU")
        lib.impl(name, impl, "CUDA")  # PyTorch ops on the tensors' device: a GPU runs the references too
        lib.impl(name, impl, "Meta")  # shapes alone, as the op library's Meta impls: fake tensors (torch.compile)
        _libraries.append(lib)
        _registered[name] = key
        names.append(name)
    return names
