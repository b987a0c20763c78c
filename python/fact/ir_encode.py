"""Encoding a torch.export ExportedProgram as a FACT IR document (docs/ir-format.md, version 1).

Any graph encodes: an op FACT has no table entry for keeps its name and gets its category from PyTorch (tags and
schema), and what the composer cannot write back as ATen calls (higher-order ops, submodule attributes, tensor
constants made inside forward, call structures PyTorch cannot serialize) is named in `replay_blocker`, so FACT
leaves the whole module to PyTorch instead of stopping.
"""
from __future__ import annotations

import inspect
import math
import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from fact.attention_masks import fold_attention_masks
from fact.decompose import copy_body, decompose_listed

IR_FORMAT = "fact-ir"
IR_VERSION = 1

PLACEHOLDER_KINDS = {
    InputKind.USER_INPUT: "input",
    InputKind.PARAMETER: "parameter",
    InputKind.BUFFER: "buffer",
    InputKind.CONSTANT_TENSOR: "constant",
}


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


def output_metas(node: torch.fx.Node) -> tuple[list[dict], str | None]:
    """One description per tensor result (non-tensor results have none), and why getitem indices would not
    line up with them (a None or a non-tensor among several results), or None."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return [tensor_meta(val)], None
    if isinstance(val, (list, tuple)):
        metas = [tensor_meta(v) for v in val if isinstance(v, torch.Tensor)]
        if len(metas) != len(val):
            return metas, f"node {node.name} ({node.target}) returns a non-tensor among its results"
        return metas, None
    return [], None


def is_view_schema(op: torch._ops.OpOverload) -> bool:
    """The op returns an alias of an input without writing it (view, reshape, transpose, ...)."""
    returns = op._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


def op_category(target) -> str:
    """The op's category as PyTorch itself describes it: tags, then the schema's aliasing. FACT's own table
    (data/ir/aten_ops.json) overrides this for the ops its families care about (GEMMs, attention, norms)."""
    if not isinstance(target, torch._ops.OpOverload):
        return "other"
    tags = set(target.tags)
    if torch.Tag.pointwise in tags:
        return "elementwise"
    if torch.Tag.reduction in tags:
        return "reduction"
    if torch.Tag.inplace_view in tags or is_view_schema(target):
        return "view"
    return "other"


def op_name(node: torch.fx.Node) -> str:
    if node.target is operator.getitem:
        return "getitem"
    if isinstance(node.target, torch._ops.OpOverload):
        return str(node.target)
    if isinstance(node.target, torch._ops.HigherOrderOperator):
        return f"higher_order.{node.target.name()}"
    module = getattr(node.target, "__module__", None) or ""
    name = getattr(node.target, "__name__", None) or str(node.target)
    return f"{module}.{name}" if module else name


def forward_input_names(model: torch.nn.Module, count: int) -> list[str] | None:
    """forward()'s first `count` positional parameter names, or None if forward takes fewer (e.g. *args)."""
    positional = [p.name for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    return positional[:count] if len(positional) >= count else None


@dataclass
class Encoded:
    nodes: list[dict]
    outputs: list
    call: dict | None  # how forward was called and what it returned (docs/ir-format.md, "call"); None: unknown
    replay_blocker: str | None = None
    notes: list[str] = field(default_factory=list)  # what the tracer rewrote, or chose not to, and why


# A constant forward makes from Python numbers travels in the IR by value up to this many elements.
MAX_CONSTANT_VALUES = 64


def constant_value(ep: ExportedProgram, target: str):
    """A forward-made constant's values as nested lists (a number for a 0-d one), or None where they are unknown
    (traced on meta) or too many."""
    value = ep.constants.get(target)
    if not isinstance(value, torch.Tensor) or value.device.type == "meta" or value.numel() > MAX_CONSTANT_VALUES:
        return None
    return value.detach().cpu().tolist()


def has_attribute_path(model: torch.nn.Module | None, target: str) -> bool:
    if model is None:
        return True
    obj = model
    for part in target.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


# Higher-order ops that only wrap a region in a mode that does not change an inference forward's values: their
# body is inlined, so the graph stays plain ATen (Hugging Face Llama's rotary embedding runs under
# set_grad_enabled(False)). The value: where in the arguments the body's submodule is, or None to keep the op
# (an autocast region that does cast: inlining it would change the numbers).
INLINED_WRAPPERS = {
    "wrap_with_set_grad_enabled": lambda args: 1,
    "wrap_with_autocast": lambda args: 4 if len(args) > 4 and args[2] is False else None,
}


def inline_wrappers(ep: ExportedProgram) -> None:
    """Replaces each call of an INLINED_WRAPPERS op by the nodes of its body, in place."""
    gm, graph = ep.graph_module, ep.graph_module.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.HigherOrderOperator):
            continue
        where = INLINED_WRAPPERS.get(node.target.name(), lambda args: None)(node.args)
        if where is None or getattr(node.args[where], "op", None) != "get_attr":
            continue
        body = getattr(gm, node.args[where].target)
        if any(n.op == "get_attr" for n in body.graph.nodes) or any(u.target is not operator.getitem for u in node.users):
            continue  # a nested region, or results used whole: left as it is (the graph then cannot be replayed)
        env, results = copy_body(graph, body.graph, node.args[where + 1:], node)
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        for user in list(node.users):
            user.replace_all_uses_with(env.get(results[user.args[1]], results[user.args[1]]))
            graph.erase_node(user)
        submodule = node.args[where]
        graph.erase_node(node)
        if not submodule.users:
            graph.erase_node(submodule)
    gm.recompile()


def call_structure(ep: ExportedProgram, user_placeholders: list[torch.fx.Node]) -> tuple[dict | None, str | None]:
    """forward's argument and result structure as PyTorch serializes pytrees, and one guard per flattened
    argument (a tensor's shape, or a non-tensor's traced value): the composed module replays the graph only for
    calls of that structure and those shapes, and runs the original forward for any other. None, and why, where
    the structure cannot be recorded."""
    guards = []
    for node in user_placeholders:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            guards.append({"shape": [int(s) for s in val.shape]})
        elif val is None or isinstance(val, (bool, int, float, str)):
            guards.append({"value": encode_value(val)})
        else:
            return None, f"forward argument {node.name} is a {type(val).__name__}, which the IR cannot guard"
    try:
        in_spec = pytree.treespec_dumps(ep.call_spec.in_spec)
        out_spec = pytree.treespec_dumps(ep.call_spec.out_spec)
    except Exception as e:  # noqa: BLE001 - a type PyTorch cannot serialize: the module stays PyTorch's
        return None, f"forward's arguments or results hold a type PyTorch cannot serialize ({type(e).__name__}: {e})"
    return {"in_spec": in_spec, "out_spec": out_spec, "inputs": guards}, None


def encode_program(ep: ExportedProgram, input_names: list[str] | None = None,
                   model: torch.nn.Module | None = None) -> Encoded:
    """The IR's `nodes` (graph order, so every ref points to an earlier node), top-level `outputs` (forward's
    results, flattened), `call` and the first reason the graph cannot be replayed, if any.

    `input_names` are the user inputs' names as forward() spells them; export's placeholder names may differ
    (it lower-cases `A` to `a`), and the node name stays export's. `model` lets constants be checked.
    """
    inline_wrappers(ep)
    decompose_listed(ep)
    notes = fold_attention_masks(ep)
    blockers: list[str] = []
    user_specs = [s for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    if input_names is None or len(input_names) != len(user_specs):
        input_names = [s.arg.name for s in user_specs]  # inputs nested in lists flatten to several placeholders
    user_names = dict(zip((s.arg.name for s in user_specs), input_names))

    kinds: dict[str, tuple[str, str]] = {}
    values: dict[str, object] = {}  # forward-made constants' values, by placeholder
    for spec in ep.graph_signature.input_specs:
        name = getattr(spec.arg, "name", None)
        if spec.kind not in PLACEHOLDER_KINDS:
            blockers.append(f"graph input {name} has kind {spec.kind.name}, which the IR cannot describe")
            kinds[name] = ("opaque", spec.kind.name)
            continue
        kind = PLACEHOLDER_KINDS[spec.kind]
        target = user_names[name] if kind == "input" else spec.target
        if kind == "constant" and not has_attribute_path(model, target):
            # Made inside forward (torch.tensor(self.value)): the IR holds a small one's value, which the composed
            # module makes again.
            if constant_value(ep, target) is None:
                blockers.append(f"tensor constant {target} is made inside forward, not an attribute the module keeps, "
                                f"and {'its value was not traced' if target in ep.constants else 'is not in the program'}"
                                f" (or has over {MAX_CONSTANT_VALUES} elements)")
            else:
                values[name] = constant_value(ep, target)
        kinds[name] = (kind, target)

    user_outputs = [i for i, s in enumerate(ep.graph_signature.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    nodes: list[dict] = []
    outputs: list = []
    user_placeholders = []
    for node in ep.graph.nodes:
        metas, meta_problem = output_metas(node)
        if meta_problem:
            blockers.append(meta_problem)
        if node.op == "placeholder":
            kind, target = kinds[node.name]
            if kind == "opaque":
                nodes.append({"name": node.name, "kind": "op", "op": f"placeholder.{target}", "args": [],
                              "kwargs": {}, "category": "other", "outputs": metas})
                continue
            if kind == "input":
                user_placeholders.append(node)
            nodes.append({"name": node.name, "kind": kind, "target": target, "outputs": metas,
                          **({"value": values[node.name]} if node.name in values else {})})
        elif node.op == "call_function":
            entry = {
                "name": node.name,
                "kind": "op",
                "op": op_name(node),
                "args": [encode_value(a) for a in node.args],
                "kwargs": {k: encode_value(v) for k, v in node.kwargs.items()},
                "category": op_category(node.target),
                "outputs": metas,
            }
            if not (node.target is operator.getitem or isinstance(node.target, torch._ops.OpOverload)):
                blockers.append(f"node {node.name} calls {entry['op']}, which is not an ATen op the composer can call")
            nodes.append(entry)
        elif node.op == "output":
            results = node.args[0]
            results = list(results) if isinstance(results, (list, tuple)) else [results]
            if len(results) == len(ep.graph_signature.output_specs):
                results = [results[i] for i in user_outputs]
            outputs = [encode_value(r) for r in results]
        else:
            # get_attr (the subgraphs of torch.cond, torch.map, ...): kept as an opaque node so the graph still
            # describes the module; the composer cannot write it back.
            blockers.append(f"graph node {node.name} is a {node.op} ({node.target}), from a control-flow operator "
                            "such as torch.cond")
            nodes.append({"name": node.name, "kind": "op", "op": f"{node.op}", "args": [{"repr": str(node.target)}],
                          "kwargs": {}, "category": "other", "outputs": metas})
    call, call_problem = call_structure(ep, user_placeholders)
    if call_problem:
        blockers.append(call_problem)
    return Encoded(nodes, outputs, call, blockers[0] if blockers else None, notes)
