"""Replays a row-wise fragment (fact-rowwise-fragment JSON, written by src/agent/rowwise_fragment.cpp) with
PyTorch's ATen ops: in float64 as the reference, in the kernel's dtype as the baseline to time."""
from __future__ import annotations

import math


def decode_arg(arg, env):
    """One IR-encoded argument (docs/ir-format.md) as a Python value; refs come from `env`."""
    import torch
    if isinstance(arg, dict):
        if "ref" in arg:
            return env[arg["ref"]]
        if "float" in arg:
            return float(arg["float"])
        if "dtype" in arg:
            return getattr(torch, arg["dtype"])
        raise ValueError(f"argument {arg} cannot be replayed in a row-wise fragment")
    if isinstance(arg, list):
        return [decode_arg(a, env) for a in arg]
    return arg


def aten_op(name: str):
    import torch
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        raise ValueError(f"op {name!r} is not an aten.<op>.<overload> name")
    return getattr(getattr(torch.ops.aten, parts[1]), parts[2])


def replay(fragment: dict, inputs: list):
    """Runs the fragment's nodes on `inputs` (tensors in fragment['inputs'] order); returns the output."""
    env = {spec["name"]: t for spec, t in zip(fragment["inputs"], inputs)}
    for node in fragment["nodes"]:
        args = [decode_arg(a, env) for a in node["args"]]
        kwargs = {k: decode_arg(v, env) for k, v in node.get("kwargs", {}).items()}
        env[node["name"]] = aten_op(node["op"])(*args, **kwargs)
    return env[fragment["output"]]


def bytes_moved(fragment: dict, rows: int, element_bytes: int) -> int:
    """Minimum DRAM traffic: every input once (a broadcast row once; a pool's input, recorded at the fragment's rows,
    in proportion to the rows; a per-row input one value a row) and the output once."""
    cols = fragment["cols"]

    def elements(s: dict) -> int:
        if s.get("window"):
            return math.prod(s["shape"]) * rows // fragment["rows"]
        if s.get("per_row"):
            return rows
        return cols if s["broadcast"] else rows * cols

    def size(s: dict) -> int:  # a mask input (bool) is one byte an element, an index (int64) eight
        return {"bool": 1, "int64": 8}.get(s.get("dtype"), element_bytes)

    return sum(elements(s) * size(s) for s in fragment["inputs"]) + rows * cols * element_bytes


def relative_errors(out, ref) -> dict:
    """Max |err| / max |ref| and the relative Frobenius error, in float64."""
    err = (out.double() - ref).abs()
    max_ref = float(ref.abs().max())
    fro = float(err.norm()) / max(float(ref.norm()), 1e-300)
    flat = int(err.argmax())
    return {"max_abs_err": float(err.max()), "max_ref": max_ref, "max_rel_err": float(err.max()) / max(max_ref, 1e-300),
            "rel_fro_err": fro, "worst_element": [flat // ref.shape[-1], flat % ref.shape[-1]],
            "finite": bool(math.isfinite(float(err.max())))}
