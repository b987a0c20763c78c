"""torch.compile(model, backend="fact"): FACT on each graph Dynamo hands over, Inductor on the rest.

Each graph runs through fact.optimize (the same export, pipeline, verification and gates; the tuning database and
the folder cache make a recompile for a shape seen before cheap). Where FACT ops were accepted, the composed graph
(aten ops and torch.ops.fact calls) is traced to an FX graph and compiled by Inductor, which fuses what FACT left
to PyTorch; the result is checked against the graph on the example inputs (KernelBench's tolerance, as the
end-to-end check), and timed against Inductor alone on the original graph in interleaved rounds: the faster
correct one is used, so the user never loses what torch.compile gives. Without a
CUDA GPU, for graphs with symbolic shapes or while autograd records, the graph goes to Inductor unchanged.
`decisions` lists, per graph, what was used and why; options come from torch.compile(options={...}) and are
fact.optimize's (numerics, budget_s, tuning_db, cache_dir, top, verbose, progress).
"""
from __future__ import annotations

import inspect
import logging
import time

import torch

from fact.api.core import FactError
from fact.compose.e2e_check import compare, cuda_batch_ms, interleaved_ms

log = logging.getLogger("fact")
decisions: list[dict] = []


def module_state_inputs(gm: torch.fx.GraphModule, example_inputs) -> tuple:
    """Which inputs of Dynamo's graph are the module's parameters and buffers (lifted to inputs): their values
    are the module's, so the checks keep them (Dynamo names a buffer's placeholder l_self_buffers_<name>_)."""
    names = [n.name for n in gm.graph.find_nodes(op="placeholder")]
    return tuple(isinstance(x, torch.nn.Parameter) or "_buffers_" in name for x, name in zip(example_inputs, names))


def why_inductor_alone(example_inputs) -> str:
    if not torch.cuda.is_available():
        return "no CUDA GPU: FACT's kernels need one"
    if not all(isinstance(x, torch.Tensor) for x in example_inputs):
        return "the graph takes symbolic sizes (dynamic shapes): FACT tunes per shape; compile with dynamic=False"
    if torch.is_grad_enabled() and any(x.requires_grad for x in example_inputs):
        return "autograd is recording: FACT's kernels have no backward; compile under torch.no_grad() to use them"
    return ""


def wall_batch_ms(fn, inputs, calls: int) -> float:
    """Milliseconds per call of back-to-back calls by the wall clock (no GPU: the reference ops on the CPU)."""
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(*inputs)
    return (time.perf_counter() - t0) * 1e3 / calls


def inductor(gm, example_inputs):
    from torch._inductor.compile_fx import compile_fx
    return compile_fx(gm, example_inputs)


def choose(gm: torch.fx.GraphModule, example_inputs, optimized, alone, decision: dict):
    """Inductor over the composed graph (FACT's ops for what they won) or Inductor alone (`alone`, compiled before
    FACT saw the graph), whichever is correct and faster on the example inputs."""
    if not optimized.uses_fact_ops:
        decision.update(used="inductor", why="no FACT kernel was verified faster than PyTorch on this graph "
                                             "(see the report)")
        return alone
    from torch.fx.experimental.proxy_tensor import make_fx
    graph = optimized._graph
    with torch.no_grad():
        composed_fx = make_fx(lambda *flat: graph._replay(gm, list(flat)))(*example_inputs)
        with_fact = inductor(composed_fx, example_inputs)
        if not compare(with_fact(*example_inputs), gm(*example_inputs))[0]:
            decision.update(used="inductor", why="Inductor over FACT's graph differed from the graph (tolerance 1e-2)")
            return alone
        cuda = any(isinstance(x, torch.Tensor) and x.is_cuda for x in example_inputs)
        ms = interleaved_ms({"fact": with_fact, "alone": alone}, example_inputs, rounds=10,
                            batch_ms=cuda_batch_ms if cuda else wall_batch_ms)
        fact_ms, alone_ms = ms["fact"], ms["alone"]
    decision.update(fact_ops=optimized.report.fact_ops, fact_ms=fact_ms, inductor_ms=alone_ms)
    if fact_ms < alone_ms:
        decision.update(used="fact", why=f"FACT + Inductor {fact_ms:.4f} ms vs Inductor alone {alone_ms:.4f} ms")
        return with_fact
    decision.update(used="inductor", why=f"Inductor alone {alone_ms:.4f} ms vs FACT + Inductor {fact_ms:.4f} ms")
    return alone


def checked_options(options: dict | None, mode: str | None) -> dict:
    """torch.compile's options for this backend: fact.optimize's keywords."""
    from fact.api.optimize import optimize
    known = set(inspect.signature(optimize).parameters) - {"model", "example_inputs", "keep_inputs"}
    unknown = sorted(set(options or {}) - known)
    if unknown or mode not in (None, "default"):
        raise FactError(f"torch.compile(backend='fact'): options {unknown} are not fact.optimize's "
                        f"({', '.join(sorted(known))})" if unknown else
                        f"torch.compile(backend='fact') has no mode {mode!r}; pass options={{...}} instead")
    return dict(options or {})


def fact_backend(gm: torch.fx.GraphModule, example_inputs, *, options: dict | None = None, mode: str | None = None):
    options = checked_options(options, mode)
    decision = {"graph": len(decisions), "nodes": len(gm.graph.nodes)}
    decisions.append(decision)
    why = why_inductor_alone(example_inputs)
    # Inductor alone first, on the graph as Dynamo gave it: what torch.compile would run, whatever FACT does next.
    alone = inductor(gm, example_inputs)
    if not why:
        from fact.api.optimize import optimize
        try:
            optimized = optimize(gm, tuple(example_inputs), keep_inputs=module_state_inputs(gm, example_inputs),
                                 **options)
            decision["report"] = str(optimized.report.folder or "")
            return choose(gm, example_inputs, optimized, alone, decision)
        except Exception as e:  # noqa: BLE001 - FACT failing on a graph must not fail the user's compile
            why = f"FACT failed on this graph: {type(e).__name__}: {e}"
    decision.update(used="inductor", why=why)
    log.info("fact backend, graph %d: Inductor alone (%s)", decision["graph"], why)
    return alone
