"""Encoding a torch.export ExportedProgram as a FACT IR document (docs/ir-format.md, version 1)."""
from __future__ import annotations

import inspect
import math
import operator
from typing import Any

import torch
import torch.fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

IR_FORMAT = "fact-ir"
IR_VERSION = 1

PLACEHOLDER_KINDS = {
    InputKind.USER_INPUT: "input",
    InputKind.PARAMETER: "parameter",
    InputKind.BUFFER: "buffer",
    InputKind.CONSTANT_TENSOR: "constant",
}


class UnsupportedGraph(Exception):
    """The exported graph uses something version 1 of the IR cannot describe."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def encode_value(value: Any) -> Any:
    """One argument value -> JSON, per the argument table in docs/ir-format.md."""
    if isinstance(value, torch.fx.Node):
        return {"ref": value.name}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return {"float": "nan"}
        if math.isinf(value):
            return {"float": "inf" if value > 0 else "-inf"}
        return value
    if isinstance(value, (list, tuple)):
        return [encode_value(v) for v in value]
    if isinstance(value, torch.dtype):
        return {"dtype": dtype_name(value)}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, (torch.memory_format, torch.layout)):
        return {"enum": str(value)}
    return {"repr": repr(value)}


def tensor_meta(t: torch.Tensor) -> dict:
    return {"shape": [int(s) for s in t.shape], "strides": [int(s) for s in t.stride()], "dtype": dtype_name(t.dtype)}


def output_metas(node: torch.fx.Node) -> list[dict]:
    """One description per tensor result; non-tensor results (None, ints) have none."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return [tensor_meta(val)]
    if isinstance(val, (list, tuple)):
        if any(v is not None and not isinstance(v, torch.Tensor) for v in val):
            raise UnsupportedGraph(f"node {node.name} ({node.target}) returns a non-tensor inside a list")
        metas = [tensor_meta(v) for v in val if isinstance(v, torch.Tensor)]
        if len(metas) != len(val):
            # A None in the middle would shift getitem indices against `outputs`.
            raise UnsupportedGraph(f"node {node.name} ({node.target}) returns None among its tensor results")
        return metas
    return []


def op_name(node: torch.fx.Node) -> str:
    if node.target is operator.getitem:
        return "getitem"
    if isinstance(node.target, torch._ops.OpOverload):
        return str(node.target)
    # Higher-order ops and Python callables: named so that IR validation rejects them with this name.
    module = getattr(node.target, "__module__", None) or ""
    name = getattr(node.target, "__name__", None) or str(node.target)
    return f"{module}.{name}" if module else name


def forward_input_names(model: torch.nn.Module, count: int) -> list[str] | None:
    """forward()'s first `count` positional parameter names, or None if forward takes fewer (e.g. *args)."""
    positional = [p.name for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    return positional[:count] if len(positional) >= count else None


def encode_program(ep: ExportedProgram, input_names: list[str] | None = None) -> tuple[list[dict], list]:
    """The IR's `nodes` (graph order, so every ref points to an earlier node) and top-level `outputs`.

    `input_names` are the user inputs' names as forward() spells them; export's placeholder names may differ
    (it lower-cases `A` to `a`), and the node name stays export's.
    """
    user_specs = [s for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    if input_names is None or len(input_names) != len(user_specs):
        input_names = [s.arg.name for s in user_specs]  # inputs nested in lists flatten to several placeholders
    user_names = dict(zip((s.arg.name for s in user_specs), input_names))

    kinds: dict[str, tuple[str, str]] = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind not in PLACEHOLDER_KINDS:
            raise UnsupportedGraph(f"graph input {spec.arg.name} has kind {spec.kind.name}, which the IR cannot describe")
        kind = PLACEHOLDER_KINDS[spec.kind]
        target = user_names[spec.arg.name] if kind == "input" else spec.target
        kinds[spec.arg.name] = (kind, target)

    nodes: list[dict] = []
    outputs: list = []
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            kind, target = kinds[node.name]
            nodes.append({"name": node.name, "kind": kind, "target": target, "outputs": output_metas(node)})
        elif node.op == "call_function":
            nodes.append({
                "name": node.name,
                "kind": "op",
                "op": op_name(node),
                "args": [encode_value(a) for a in node.args],
                "kwargs": {k: encode_value(v) for k, v in node.kwargs.items()},
                "outputs": output_metas(node),
            })
        elif node.op == "output":
            results = node.args[0]
            outputs = [encode_value(r) for r in (results if isinstance(results, (list, tuple)) else [results])]
        else:
            raise UnsupportedGraph(
                f"graph node {node.name} is a {node.op} (from control-flow operators such as torch.cond), "
                "which the IR cannot describe")
    return nodes, outputs
