"""FACT: a PyTorch module in, a faster verified module built from CUTLASS/CuTe kernels out.

    optimized = fact.optimize(model, example_inputs)      # the module, with FACT's kernels where they won
    print(optimized.report)                                # what runs where, numerics, errors, times
    plan = fact.explain(model, example_inputs)             # the plan alone, no GPU needed
    fact.save(optimized, "folder"); fact.load("folder")    # the composed artifact
    torch.compile(model, backend="fact")                   # FACT per graph, Inductor for the rest

The names load on first use, so `import fact` stays cheap (FACT's own worker imports this package).
"""
from importlib import import_module

_NAMES = {
    "optimize": "fact.api.optimize", "explain": "fact.api.optimize", "save": "fact.api.artifact",
    "load": "fact.api.artifact", "FactError": "fact.api.core", "OptimizedModule": "fact.api.optimized_module",
    "Report": "fact.api.results", "Plan": "fact.api.results",
}
__all__ = list(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module 'fact' has no attribute {name!r}")
    return getattr(import_module(_NAMES[name]), name)
