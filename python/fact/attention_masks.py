"""Folds the attention masks a module builds from constants and shapes alone into the scaled_dot_product_attention
call that reads them: a causal mask becomes is_causal=True, an all-true bool (or all-zero additive) mask goes.

Hugging Face's decoders call SDPA with is_causal=True in eager, but under torch.export they build the causal mask
from arange / cache_position / position_ids (arange, le, cumsum, diff, index, __and__, ...) and pass it as a bool
attn_mask. FACT's attention kernels then read the mask per score and skip no key blocks, and the mask's ~20 small ops
stay PyTorch's on every forward. Such a mask's value is fixed by the traced shapes, so it is evaluated once here on
the CPU (only its producer subgraph) and compared with the causal mask.

The pass never changes results; anything it is not sure about keeps the call as it is:
- the subgraph may read no graph input at all (no forward input, parameter, buffer or lifted constant: a user's
  padding mask, or state someone may update, stays a mask), and no get_attr;
- every op in it is a functional, seeded-randomness-free ATen op that does not return uninitialized memory (empty);
- a floating-point value in it must come from an op that is exact on every device (fills, selects, casts, views,
  + - * of exact values), so the CPU's value is the device's bit for bit;
- causal only where seq_q == seq_k: there PyTorch's is_causal (top-left aligned) and the attention ABI's
  (data/families/attention.json, bottom-right aligned: key j for query i iff j <= i + seq_k - seq_q) agree;
- dropout_p 0, is_causal False, and a mask that only broadcasts over [..., seq_q, seq_k] (no new result dims).
"""
from __future__ import annotations

import functools
import json
import operator
from dataclasses import dataclass

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind

from fact.paths import data_dir

SDPA = torch.ops.aten.scaled_dot_product_attention.default
SDPA_POSITIONAL = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")
# The most a mask's producer subgraph may hold (its values, all together) to be evaluated at trace time.
MAX_EVAL_BYTES = 1 << 30


@functools.cache
def trace_time_ops() -> dict:
    """data/ir/trace_time_ops.json: which ops a value evaluated at trace time may be built from."""
    return json.loads((data_dir() / "ir" / "trace_time_ops.json").read_text())



@dataclass
class Producers:
    nodes: list[torch.fx.Node]  # the mask's producer subgraph in graph order, the mask last; empty when `why`
    why: str | None = None      # why the mask is not a function of constants and shapes alone


def reading_why(node: torch.fx.Node, input_kinds: dict[str, InputKind]) -> str | None:
    """Why `node` makes a mask's value something other than a function of constants and shapes, or None."""
    if node.op == "placeholder":
        kind = input_kinds.get(node.name)
        what = {InputKind.USER_INPUT: "the forward input", InputKind.PARAMETER: "the parameter",
                InputKind.BUFFER: "the buffer", InputKind.CONSTANT_TENSOR: "the tensor constant"}
        return f"it reads {what.get(kind, 'the graph input')} {node.name}"
    if node.op != "call_function":
        return f"it reads {node.name} ({node.op})"
    target = node.target
    if target is operator.getitem:
        return None
    if not isinstance(target, torch._ops.OpOverload):
        return f"it calls {target}, not an ATen op"
    name = str(target)
    if torch.Tag.nondeterministic_seeded in target.tags or torch.Tag.nondeterministic_bitwise in target.tags:
        return f"{node.name} ({name}) is not deterministic"
    if target._schema.is_mutable or node.is_impure():
        return f"{node.name} ({name}) has side effects"
    if target._opname in trace_time_ops()["uninitialized"]:
        return f"{node.name} ({name}) returns uninitialized memory"
    vals = node.meta.get("val")
    vals = list(vals) if isinstance(vals, (list, tuple)) else [vals]
    if not all(isinstance(v, torch.Tensor) for v in vals):
        return f"{node.name} ({name}) returns a value that is not a tensor"
    if any(v.is_floating_point() or v.is_complex() for v in vals) and target._opname not in trace_time_ops()["exact_float"]:
        return f"{node.name} ({name}) computes floating-point values the CPU may round differently from the device"
    if any(isinstance(a, torch.SymInt) for a in pytree.tree_leaves((node.args, node.kwargs))):
        return f"{node.name} ({name}) takes a symbolic size"
    return None


def producers(mask: torch.fx.Node, input_kinds: dict[str, InputKind], order: dict[torch.fx.Node, int]) -> Producers:
    seen: set[torch.fx.Node] = set()
    stack = [mask]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        why = reading_why(node, input_kinds)
        if why:
            return Producers([], why)
        stack.extend(node.all_input_nodes)
    return Producers(sorted(seen, key=order.__getitem__))


def on_cpu(value):
    """The copied subgraph runs on the CPU whatever device the trace used (meta: there are no values there)."""
    return pytree.tree_map(lambda v: torch.device("cpu") if isinstance(v, torch.device) else v, value)


def evaluate(nodes: list[torch.fx.Node]) -> torch.Tensor:
    """The value of nodes[-1], computed on the CPU from a copy of the subgraph `nodes` (which reads no input)."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in nodes:
        copy = graph.node_copy(node, lambda n: env[n])
        copy.args, copy.kwargs = on_cpu(copy.args), on_cpu(copy.kwargs)
        env[node] = copy
    graph.output(env[nodes[-1]])
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    with torch.no_grad(), torch.device("cpu"):
        return module()


def value_bytes(nodes: list[torch.fx.Node]) -> int:
    total = 0
    for node in nodes:
        vals = node.meta.get("val")
        for v in (vals if isinstance(vals, (list, tuple)) else [vals]):
            if isinstance(v, torch.Tensor):
                total += v.numel() * v.element_size()
    return total


def sdpa_arguments(node: torch.fx.Node) -> dict:
    """The call's arguments by schema name (defaults filled in), keyword-only ones included."""
    bound = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False}
    bound.update(zip(SDPA_POSITIONAL, node.args))
    bound.update(node.kwargs)
    return bound


def call_why(node: torch.fx.Node) -> str | None:
    """Why the call itself cannot take is_causal instead of its mask, or None."""
    args = sdpa_arguments(node)
    if args["dropout_p"] != 0.0:
        return f"dropout_p is {args['dropout_p']}"
    if args["is_causal"] is not False:
        return "the call already has is_causal set"
    return None


def scores_shape(node: torch.fx.Node) -> tuple[int, ...] | None:
    """[..., seq_q, seq_k] of the call's attention scores, from its result and key; None where unknown."""
    out, key = node.meta.get("val"), getattr(node.args[1], "meta", {}).get("val")
    if not isinstance(out, torch.Tensor) or not isinstance(key, torch.Tensor) or out.dim() < 2 or key.dim() < 2:
        return None
    return (*out.shape[:-1], key.shape[-2])


def verdict(mask: torch.Tensor, shape: tuple[int, ...]) -> tuple[str | None, str]:
    """("causal" or "none", why) where the mask is the causal mask or no mask on scores of `shape`, else (None, why)."""
    try:
        if tuple(torch.broadcast_shapes(mask.shape, shape)) != tuple(shape):
            return None, f"its shape {list(mask.shape)} does not broadcast to the scores' {list(shape)}"
    except RuntimeError:
        return None, f"its shape {list(mask.shape)} does not broadcast to the scores' {list(shape)}"
    seq_q, seq_k = shape[-2], shape[-1]
    allowed = torch.ones(seq_q, seq_k, dtype=torch.bool).tril(seq_k - seq_q)
    if mask.dtype == torch.bool:
        if bool(mask.all()):
            return "none", "a bool mask that keeps every score"
        causal = seq_q == seq_k and torch.equal(*torch.broadcast_tensors(mask, allowed))
    elif mask.is_floating_point():
        if bool((mask == 0).all()):
            return "none", "an additive mask of zeros"
        expected = torch.zeros(seq_q, seq_k, dtype=mask.dtype).masked_fill(~allowed, float("-inf"))
        causal = seq_q == seq_k and torch.equal(*torch.broadcast_tensors(mask, expected))
    else:
        return None, f"its dtype is {mask.dtype}"
    if causal:
        return "causal", "the causal mask"
    return None, "a constant mask that is neither causal nor keeps every score"


def rewrite(node: torch.fx.Node, causal: bool) -> None:
    """The call without its mask: SDPA(q, k, v[, None, 0.0, True], scale=..., enable_gqa=...)."""
    args = sdpa_arguments(node)
    node.args = (args["query"], args["key"], args["value"], *((None, 0.0, True) if causal else ()))
    node.kwargs = {k: v for k, v in node.kwargs.items() if k not in SDPA_POSITIONAL}


def fold_attention_masks(ep: torch.export.ExportedProgram) -> list[str]:
    """Rewrites `ep`'s SDPA calls whose attn_mask is a constant causal (or empty) mask, in place, and removes the ops
    that built it where nothing else reads them. Returns one note per mask: folded and how, or kept and why."""
    graph = ep.graph_module.graph
    input_kinds = {getattr(s.arg, "name", None): s.kind for s in ep.graph_signature.input_specs}
    order = {n: i for i, n in enumerate(graph.nodes)}
    calls_of: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for node in graph.nodes:
        if node.op == "call_function" and node.target is SDPA:
            mask = sdpa_arguments(node)["attn_mask"]
            if isinstance(mask, torch.fx.Node):
                calls_of.setdefault(mask, []).append(node)

    notes = []
    for mask, calls in calls_of.items():
        names = ", ".join(c.name for c in calls)
        found = producers(mask, input_kinds, order)
        why = found.why
        size = value_bytes(found.nodes) if why is None else 0
        if size > MAX_EVAL_BYTES:
            why = f"building it takes {size >> 20} MiB, more than the tracer evaluates"
        value = None
        if why is None:
            try:
                value = evaluate(found.nodes)
            except Exception as e:  # noqa: BLE001 - a subgraph the CPU cannot run: the mask stays
                first = str(e).splitlines()[0] if str(e) else ""
                why = f"it could not be evaluated on the CPU ({type(e).__name__}: {first})"
        if why is None and not isinstance(value, torch.Tensor):
            why = "it is not a tensor"
        if why is not None:
            notes.append(f"attn_mask {mask.name} of {names} kept: {why}")
            continue
        folded, kept = [], []
        for call in calls:
            shape = scores_shape(call)
            kind, what = verdict(value, shape) if shape else (None, "the scores' shape is unknown")
            if kind is not None and (blocked := call_why(call)):
                kind, what = None, f"{what}, but {blocked}"
            if kind is None:
                kept.append(f"{call.name} ({what})")
                continue
            rewrite(call, causal=kind == "causal")
            folded.append((call.name, kind, what))
        removed = 0
        for node in reversed(found.nodes):
            if not node.users:
                graph.erase_node(node)
                removed += 1
        for kind in ("causal", "none"):
            these = [(n, what) for n, k, what in folded if k == kind]
            if these:
                result = "is_causal=True and no mask" if kind == "causal" else "no mask"
                call = "the calls take" if len(these) > 1 else "the call takes"
                notes.append(f"attn_mask {mask.name} of {', '.join(n for n, _ in these)} folded: {kind} ({mask.name} "
                             f"is built from constants and shapes alone and is {these[0][1]}; {call} {result}; "
                             f"{removed} ops that built it removed)")
        if kept:
            notes.append(f"attn_mask {mask.name} kept: {'; '.join(kept)}")
    if calls_of:
        ep.graph_module.recompile()
    return notes
