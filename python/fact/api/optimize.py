"""fact.optimize(model, example_inputs) and fact.explain(model, example_inputs): the pipeline of `fact optimize`
and `fact discover` on a live module, in this process (the C++ core through fact._core).

The module is exported with torch.export and written as a problem folder (live_problem.py) under cache_dir, named
by the graph, the call's shapes and the settings; the run's output stays beside it. A later call for the same graph
and settings on the same GPU takes that verified result as it is (reuse=False runs everything again; the tuning
database alone makes a re-run skip the kernels' tuning)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from fact.api import live_problem
from fact.api.core import FactError, call, core
from fact.api.optimized_module import OptimizedModule
from fact.api.progress import Progress
from fact.api.results import Plan, Report

RUN_FILE = "run.json"  # what the finished run in a problem folder was made with


def default_cache_dir() -> Path:
    return Path(os.environ.get("FACT_CACHE_DIR") or Path.home() / ".cache" / "fact") / "optimize"


def gpu_arch() -> str:
    """FACT's architecture for this process's GPU (sm90 without one: the plan is the same)."""
    if not torch.cuda.is_available():
        return "sm90"
    major, minor = torch.cuda.get_device_capability()
    known = core().arch_names()
    # A GPU of a known major version runs that major's base code (sm_80 kernels on an sm86 or sm89).
    for name in (f"sm{major}{minor}", f"sm{major}0"):
        if name in known:
            return name
    raise FactError(f"FACT has kernels for {', '.join(known)}; this GPU ({torch.cuda.get_device_name()}) is "
                    f"sm{major}{minor}: pass arch= one of them to plan for it")


def run_identity() -> dict:
    """What a finished run is only reused with: the same GPU, torch and FACT."""
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    return {"device": device, "torch": torch.__version__, "fact": core().__version__}


def run_settings(numerics: str | None, arch: str, conv_numerics: str | None) -> dict:
    """The settings a run's cache folder and identity are keyed on; conv_numerics only when set, so earlier runs'
    keys stay the same."""
    return {"numerics": numerics or "", "arch": arch, **({"conv_numerics": conv_numerics} if conv_numerics else {})}


def exported(model, example_inputs, cache_dir, settings: dict, keep: tuple = ()) -> live_problem.LiveProblem:
    args = live_problem.example_arguments(example_inputs)
    return live_problem.export(model, args, Path(cache_dir) if cache_dir else default_cache_dir(), settings, keep)


def optimize(model: torch.nn.Module, example_inputs, *, numerics: str | None = None, arch: str | None = None,
             tuning_db: str | os.PathLike | None = None, budget_s: float | None = None, agent: str = "builtin",
             cache_dir: str | os.PathLike | None = None, endpoint: str | None = None, llm_model: str | None = None,
             top: int = 6, compile_baseline: bool = False, reuse: bool = True, verbose: bool = False,
             progress: bool = True, keep_inputs: tuple = (), conv_numerics: str | None = None) -> OptimizedModule:
    """The module with what FACT verified and found faster as CUDA kernels, the rest PyTorch's, never slower than
    the original (the end-to-end gate of `fact optimize`). `example_inputs`: forward's arguments (a tensor or a
    tuple), on the device the module will run on. numerics: fp32, 3xtf32 (default for fp32 models: fp32-accurate),
    tf32, bf16, fp16. conv_numerics: an fp32 model's convolutions, tf32 (PyTorch's cuDNN default) or 3xtf32
    (fp32-accurate, checked against cuDNN with TF32 off). budget_s: seconds of kernel tuning; patterns not tuned by
    then stay PyTorch's.
    compile_baseline also times torch.compile in the report. keep_inputs: per argument, whether the checks use its
    example value instead of fresh random ones (a mask, say). The result's `report` says what runs where and why."""
    arch = arch or gpu_arch()
    settings = run_settings(numerics, arch, conv_numerics)
    problem = exported(model, example_inputs, cache_dir, settings, tuple(keep_inputs))
    if problem.program is None:
        return OptimizedModule(model, None, Report.left_to_pytorch(problem.untraceable))
    out = problem.folder / "out"
    identity = {**run_identity(), **settings, "top": top, "agent": agent, "budget_s": budget_s}
    run_file = problem.folder / RUN_FILE
    reused = reuse and run_file.is_file() and json.loads(run_file.read_text()) == identity and \
        (out / "composed" / "manifest.json").is_file()
    if not reused:
        live_problem.write(problem, type(model).__qualname__)
        run_file.unlink(missing_ok=True)
        with Progress(f"fact {type(model).__name__}", verbose, progress) as p:
            try:
                call("optimize", str(problem.model_file), str(out), numerics=numerics or "", arch=arch, top=top,
                     db=str(tuning_db or ""), tune_budget_s=int(budget_s or 0), compile_baselines=compile_baseline,
                     agent=agent, endpoint=endpoint or "", llm_model=llm_model or "",
                     conv_numerics=conv_numerics or "", on_out=p.out_line,
                     on_log=p.log_line)
            except FactError as e:
                raise FactError(f"{e}{p.failures()}") from None
        run_file.write_text(json.dumps(identity) + "\n")
    report = Report.load(out)
    report["reused"] = reused
    composed = out / "composed"
    return OptimizedModule(model, composed if (composed / "manifest.json").is_file() else None, report)


def explain(model: torch.nn.Module, example_inputs, *, numerics: str | None = None, arch: str = "sm90",
            cache_dir: str | os.PathLike | None = None, conv_numerics: str | None = None) -> Plan:
    """The plan FACT would realize for the module (`fact discover`), without a GPU: the matched patterns ranked by
    the expected gain, and what stays PyTorch's and why."""
    problem = exported(model, example_inputs, cache_dir, run_settings(numerics, arch, conv_numerics))
    if problem.program is None:
        return Plan({"patterns": [], "left_to_pytorch": problem.untraceable},
                    f"The whole module stays PyTorch's: {problem.untraceable}")
    live_problem.write(problem, type(model).__qualname__)
    lines: list[str] = []
    plan_file = problem.folder / "plan.json"
    call("discover", str(problem.model_file), str(plan_file), arch=arch, numerics=numerics or "",
         conv_numerics=conv_numerics or "", on_out=lines.append, on_log=None)
    return Plan(json.loads(plan_file.read_text()), "".join(lines).rstrip("\n"))
