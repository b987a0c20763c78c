"""fact.save(optimized, path) / fact.load(path): the composed artifact of fact.optimize as one folder: the composed
module (model_new.py, user_model.py, manifest.json, libfact_ops.so, reference ops), the exported program and its
example call, the module's current weights (weights.pt) and artifact.json, which names the torch, CUDA and GPU the
op library was built for. Loading refuses, with the reason, a torch or CUDA other than the one that built the
library, or another GPU when the module runs FACT ops."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

from fact.api.core import FactError, core
from fact.api.optimized_module import OptimizedModule, load_composed
from fact.api.results import Report

ARTIFACT_FILE = "artifact.json"
FORMAT = "fact-artifact"
VERSION = 1
PROBLEM_FILES = ("program.pt2", "example_inputs.pt")


def gpu() -> dict | None:
    if not torch.cuda.is_available():
        return None
    return {"name": torch.cuda.get_device_name(), "capability": list(torch.cuda.get_device_capability())}


def save(optimized: OptimizedModule, path: str | os.PathLike) -> Path:
    """Writes the artifact folder (replacing an earlier artifact there, never another folder); returns its path."""
    if not isinstance(optimized, OptimizedModule):
        raise FactError(f"fact.save takes what fact.optimize returned, got {type(optimized).__name__}")
    if optimized.composed_dir is None:
        raise FactError("this module stayed PyTorch's whole (" + optimized.report.get("left_to_pytorch", "no composed "
                        "module") + "): there is no FACT artifact to save; save the original with torch.save")
    path = Path(path)
    if path.exists() and not (path / ARTIFACT_FILE).is_file():
        raise FactError(f"{path} exists and is not a FACT artifact: choose a new folder")
    problem_dir = optimized.composed_dir.parent.parent  # <problem>/out/composed
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(optimized.composed_dir, tmp)
    for name in PROBLEM_FILES:
        shutil.copy2(problem_dir / name, tmp / name)
    for name in ("report.json", "report.md"):
        if (optimized.composed_dir.parent / name).is_file():
            shutil.copy2(optimized.composed_dir.parent / name, tmp / name)
    torch.save(optimized.original.state_dict(), tmp / "weights.pt")
    manifest = json.loads((tmp / "manifest.json").read_text())
    (tmp / ARTIFACT_FILE).write_text(json.dumps({
        "format": FORMAT, "version": VERSION, "fact": core().__version__, "torch": torch.__version__,
        "cuda": torch.version.cuda, "gpu": gpu(), "fact_ops": [a["op"] for a in manifest.get("accepted", [])],
        "module": type(optimized.original).__qualname__}, indent=1) + "\n")
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    return path


def check_loadable(path: Path, artifact: dict) -> None:
    if artifact.get("format") != FORMAT:
        raise FactError(f"{path / ARTIFACT_FILE} is not a FACT artifact (format {artifact.get('format')!r})")
    if artifact.get("version") != VERSION:
        raise FactError(f"{path} is a FACT artifact of version {artifact.get('version')}; this FACT reads {VERSION}: "
                        f"run fact.optimize and fact.save again")
    if (artifact["torch"], artifact["cuda"]) != (torch.__version__, torch.version.cuda):
        raise FactError(f"{path} was built for torch {artifact['torch']} (CUDA {artifact['cuda']}); this Python has "
                        f"torch {torch.__version__} (CUDA {torch.version.cuda}), whose C++ ABI its op library was not "
                        f"built against: run fact.optimize again here")
    if not artifact["fact_ops"]:
        return
    here = gpu()
    if here is None:
        raise FactError(f"{path} runs FACT's CUDA kernels ({len(artifact['fact_ops'])} ops) but PyTorch sees no CUDA "
                        f"GPU here; load it on a machine with a {artifact['gpu']['name']}")
    if here["capability"] != artifact["gpu"]["capability"]:
        raise FactError(f"{path} holds kernels built for {artifact['gpu']['name']} (sm{''.join(map(str, artifact['gpu']['capability']))}); "
                        f"this GPU is {here['name']} (sm{''.join(map(str, here['capability']))}): run fact.optimize "
                        f"again on this GPU")


def load(path: str | os.PathLike, device: str | torch.device | None = None) -> torch.nn.Module:
    """The saved module (a ModelNew of the composed folder with the saved weights), on `device` (default: cuda
    when it runs FACT ops, else cpu), in eval mode; `.report` is the run's report."""
    path = Path(path)
    if not (path / ARTIFACT_FILE).is_file():
        raise FactError(f"{path} is not a FACT artifact (no {ARTIFACT_FILE}): write one with fact.save")
    artifact = json.loads((path / ARTIFACT_FILE).read_text())
    check_loadable(path, artifact)
    module = load_composed(path).ModelNew()
    module.load_state_dict(torch.load(path / "weights.pt", map_location="cpu", weights_only=True))
    module = module.to(device or ("cuda" if artifact["fact_ops"] else "cpu")).eval()
    module.report = Report.load(path) if (path / "report.json").is_file() else Report({})
    return module
