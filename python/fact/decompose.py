"""Replaces, in an exported graph, each call of an op data/ir/aten_ops.json marks "decompose" by the ops of
PyTorch's own decomposition of it (torch._decomp's table, else the op's CompositeImplicitAutograd kernel), each
(values, indices) reduction whose indices are never read by its values-only op ("values_only"), each in-place
call of a pointwise op (nn.ReLU(inplace=True)'s relu_, `x += y`'s add_) on an intermediate by the op itself, and drops
the calls that compute nothing ("drop": the dtype check torch.export writes before each .to()).

A loss such as smooth_l1_loss or kl_div is one ATen op no kernel family reads; its decomposition is pointwise ops
and a reduction, which FACT generates one kernel from. Only the listed calls change: torch.export's
run_decompositions would also rewrite the rest of the graph (batch_norm, dropout), which FACT's tables read as they
are. A call whose decomposition cannot be traced on its arguments' meta values stays whole.
"""
from __future__ import annotations

import functools
import json
import operator

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.dialect.common.cse_pass import CSEPass

from fact.paths import data_dir


@functools.cache
def op_table() -> dict:
    return json.loads((data_dir() / "ir" / "aten_ops.json").read_text())["ops"]


@functools.cache
def ops_marked(flag: str) -> frozenset[str]:
    """The ops data/ir/aten_ops.json marks with `flag` ("decompose", "drop")."""
    return frozenset(name for name, entry in op_table().items() if entry.get(flag))


def aten_overload(name: str) -> torch._ops.OpOverload:
    _, op, overload = name.split(".")
    return getattr(getattr(torch.ops.aten, op), overload)


def values_only(graph: torch.fx.Graph) -> list[str]:
    """Rewrites max.dim / min.dim calls whose indices are never read as amax / amin over [dim] (data/ir/aten_ops.json
    "values_only"): one result, a row reduction generated kernels take. Returns the rewritten calls' names."""
    done = []
    for node in list(graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        target = op_table().get(str(node.target), {}).get("values_only")
        users = list(node.users)
        # export keeps getitem(., 1) of the indices even when nothing reads it
        if not target or not users or any(u.target is not operator.getitem or (u.args[1] != 0 and u.users)
                                          for u in users):
            continue
        x, dim, *rest = node.args
        keepdim = rest[0] if rest else node.kwargs.get("keepdim", False)
        with graph.inserting_before(node):
            values = graph.call_function(aten_overload(target), (x, [dim], keepdim))
        values.meta = {k: v for k, v in node.meta.items() if k != "val"}
        values.meta["val"] = node.meta["val"][0]
        for u in users:
            if u.args[1] == 0:
                u.replace_all_uses_with(values)
            graph.erase_node(u)
        graph.erase_node(node)
        done.append(node.name)
    return done


def drop_checks(graph: torch.fx.Graph) -> list[str]:
    """Removes the calls data/ir/aten_ops.json marks "drop" (aten._assert_tensor_metadata: a check of a traced
    dtype and device that returns nothing): they read the value a .to() casts, which a fused op may replace
    (Hugging Face's RMSNorm casts the normalized value back to bf16). Returns the removed calls' names."""
    done = []
    for node in list(graph.nodes):
        if node.op == "call_function" and str(node.target) in ops_marked("drop") and not node.users:
            graph.erase_node(node)
            done.append(node.name)
    return done


@functools.cache
def pointwise_ops() -> frozenset[str]:
    return frozenset(json.loads((data_dir() / "ir" / "pointwise_ops.json").read_text())["ops"])


def aliases(node: torch.fx.Node) -> bool:
    """Whether the call returns a view of an argument (its schema's result aliases one)."""
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and any(r.alias_info is not None for r in target._schema.returns)


def out_of_place(graph: torch.fx.Graph) -> list[str]:
    """Rewrites in-place calls of the pointwise ops data/ir/pointwise_ops.json lists (aten.relu_.default ->
    aten.relu.default) whose first argument is an intermediate: the call's result, and every later read of that
    argument (which would see the updated values), become the out-of-place op's result, so an epilogue or a generated
    kernel can take the op. A call that updates a graph input, parameter or buffer keeps its side effect and stays.
    Returns the rewritten calls' names."""
    done = []
    order = {n: i for i, n in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        packet, overload = node.target._opname, node.target._overloadname
        if not packet.endswith("_") or packet.endswith("__"):
            continue
        functional = f"aten.{packet[:-1]}.{overload}"
        if functional not in pointwise_ops() or not node.args or not isinstance(node.args[0], torch.fx.Node):
            continue
        target = node.args[0]
        # An update through a view reaches the viewed tensor, and a view taken before it sees the update: both stay.
        if target.op != "call_function" or aliases(target) or any(
                aliases(u) for u in target.users if order.get(u, len(order)) < order[node]):
            continue
        with graph.inserting_before(node):
            fresh = graph.call_function(aten_overload(functional), node.args, node.kwargs)
        fresh.meta = dict(node.meta)
        for user in list(target.users):
            if user is not node and user is not fresh and order.get(user, len(order)) > order[node]:
                user.replace_input_with(target, fresh)
        node.replace_all_uses_with(fresh)
        graph.erase_node(node)
        order[fresh] = order[node]
        done.append(node.name)
    return done


def decomposition(op: torch._ops.OpOverload):
    from torch._decomp import decomposition_table
    if op in decomposition_table:
        return decomposition_table[op]
    return op.decompose if op._can_decompose() else None


def listed_decompositions() -> dict:
    """The table make_fx applies inside a decomposition, so a listed op it calls (kl_div's xlogy) goes too."""
    table = {}
    for name in ops_marked("decompose"):
        target = aten_overload(name)
        if (fn := decomposition(target)) is not None:
            table[target] = fn
    return table


def traced_decomposition(node: torch.fx.Node) -> tuple[torch.fx.GraphModule, list[torch.fx.Node]] | None:
    """The decomposition traced on meta tensors shaped like the call's tensor arguments, and those arguments (one
    per placeholder, in order); None when it cannot be traced or reads a constant tensor of its own."""
    fn = decomposition(node.target)
    flat, spec = pytree.tree_flatten((node.args, node.kwargs))
    positions = [i for i, a in enumerate(flat) if isinstance(a, torch.fx.Node)]
    vals = [flat[i].meta.get("val") for i in positions]
    if fn is None or not all(isinstance(v, torch.Tensor) for v in vals):
        return None

    def call(*tensors):
        values = list(flat)
        for i, t in zip(positions, tensors):
            values[i] = t
        args, kwargs = pytree.tree_unflatten(values, spec)
        return fn(*args, **kwargs)

    metas = [torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta") for v in vals]
    try:
        traced = make_fx(call, decomposition_table=listed_decompositions())(*metas)
    except Exception:  # noqa: BLE001 - a decomposition that does not trace here: the op stays whole
        return None
    if any(n.op == "get_attr" for n in traced.graph.nodes):
        return None
    # A decomposition may compute one value several times (nll_loss's target != ignore_index three times): each is one
    # more launch in the composed module. PyTorch's CSE pass keeps the first (random ops are never merged).
    traced = CSEPass()(traced).graph_module
    selects_take_numbers(traced.graph)
    return traced, [flat[i] for i in positions]


def selects_take_numbers(graph: torch.fx.Graph) -> None:
    """torch.where(c, 0, x) traces as where.self over a scalar_tensor(0); the where overloads that take the number
    keep it a literal, as export writes them, so a generated kernel reads no 0-d tensor."""
    aten = torch.ops.aten
    overload = {(True, False): aten.where.ScalarSelf, (False, True): aten.where.ScalarOther, (True, True): aten.where.Scalar}
    for node in list(graph.nodes):
        if node.target is not aten.where.self or node.kwargs:
            continue
        cond, a, b = node.args
        number = [getattr(v, "target", None) is aten.scalar_tensor.default and not v.args[1:] for v in (a, b)]
        if not any(number):
            continue
        node.target = overload[tuple(number)]
        node.args = (cond, *(v.args[0] if n else v for v, n in zip((a, b), number)))
    for node in reversed(list(graph.nodes)):
        if node.target is aten.scalar_tensor.default and not node.users:
            graph.erase_node(node)


def copy_body(graph: torch.fx.Graph, body: torch.fx.Graph, operands, before: torch.fx.Node) -> tuple[dict, object]:
    """Copies `body`'s nodes into `graph` before `before`, its placeholders bound to `operands` in order; returns
    the map from body nodes to their values in `graph` and the body's output argument (of body nodes)."""
    env: dict = {}
    operands_left = iter(operands)
    result = None
    with graph.inserting_before(before):
        for inner in body.nodes:
            if inner.op == "placeholder":
                env[inner] = next(operands_left)
            elif inner.op == "output":
                result = inner.args[0]
            else:
                env[inner] = graph.node_copy(inner, lambda n: env[n])
    return env, result


def inline(graph: torch.fx.Graph, node: torch.fx.Node, traced: torch.fx.GraphModule, operands: list) -> None:
    env, result = copy_body(graph, traced.graph, operands, node)
    copies = [n for n in env.values() if n not in operands]
    result = pytree.tree_map(lambda r: env[r] if isinstance(r, torch.fx.Node) else r, result)
    if isinstance(result, (list, tuple)):
        for user in list(node.users):
            if user.target is not operator.getitem:
                raise ValueError(f"{node.name}: a result used whole")
            user.replace_all_uses_with(result[user.args[1]])
            graph.erase_node(user)
    else:
        node.replace_all_uses_with(result)
    graph.erase_node(node)
    for n in reversed(copies):  # a decomposition may compute what its result does not use
        if not n.users and not n.is_impure():
            graph.erase_node(n)


def into_allowed_ops(name: str, body: torch.fx.Graph) -> bool:
    """An op marked "decompose": {"only_into": [ops]} is decomposed only where its decomposition is those ops alone
    (adaptive_avg_pool2d to an output of 1x1 is a mean over the spatial dims, a row reduction FACT generates; to
    other sizes an index gather that would run slower than PyTorch's kernel)."""
    mark = op_table()[name].get("decompose")
    if not isinstance(mark, dict):
        return True
    allowed = set(mark.get("only_into", []))
    return all(str(n.target) in allowed for n in body.nodes if n.op == "call_function")


def decompose_listed(ep: torch.export.ExportedProgram) -> list[str]:
    """Decomposes the listed calls of `ep`'s graph in place, then rewrites values-only reductions and in-place
    pointwise calls and drops the checks that compute nothing; returns the names of the calls it replaced."""
    listed = ops_marked("decompose")
    gm = ep.graph_module
    done = []
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if str(node.target) not in listed:
            continue
        found = traced_decomposition(node)
        if found is None or not into_allowed_ops(str(node.target), found[0].graph):
            continue
        results = node.meta.get("val")
        if isinstance(results, (list, tuple)) and any(u.target is not operator.getitem for u in node.users):
            continue
        inline(gm.graph, node, *found)
        done.append(node.name)
    done += values_only(gm.graph)
    done += out_of_place(gm.graph)
    done += drop_checks(gm.graph)
    if done:
        gm.recompile()
    return done
