"""CPU reference of a GEMM op (gemm_<id>): what the CUTLASS wrapper computes (templates/cutlass/op_wrapper_op.cpp.in),
the op's epilogue tree over acc = a @ b, with b the [K, N] operand (a Linear weight arrives as weight.t()), alpha = 1,
beta = 0 and no C; "bias" is the op's bias vector, "residual" its residual slot (SwiGLU's U for bias_silu_mul) and
vec<i> the op's `vectors` (the slots the tree reads, in slot order, flattened: row [N], col [batch * M], scalar [1]).
The tree comes from the composed module's manifest entry ("epilogue_tree", with its activations' table entries under
"activations"), or for a predefined epilogue name from the data files epilogues/named.json and activations.json (in a
composed folder next to this file, else FACT's data/epilogues).

The evaluator here (evaluate_epilogue) is also the one FACT's GEMM measurement case uses for its float64 reference
and PyTorch baseline: one reading of the tree format (src/realize/families/gemm/epilogue_tree.h) on the Python side.
This file ships in composed folders, where the fact package may be absent: it needs PyTorch only."""
import json
import os
from pathlib import Path

import torch

# gemm_op_schema_arguments in gemm_codegen.cpp; b_constant (b is a module weight: the CUDA op may keep its
# pre-pass copy) changes nothing in what the op computes.
SCHEMA = "(Tensor a, Tensor b, Tensor? bias, Tensor? residual, *, bool b_constant=False) -> Tensor"
# The schema of an op whose tree reads vec<i> slots.
SCHEMA_WITH_VECTORS = ("(Tensor a, Tensor b, Tensor? bias, Tensor? residual, Tensor[] vectors, *, "
                       "bool b_constant=False) -> Tensor")
MAX_VECTORS = 8  # FACT_GEMM_MAX_VECTORS: slots vec0..vec7
VECTOR_SLOTS = tuple(f"vec{i}" for i in range(MAX_VECTORS))
BROADCASTS = ("row", "col", "scalar")
# The binary ops on tensors and numbers (max/min get tensors: a number operand is broadcast first).
BINARY_OPS = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
              "div": lambda x, y: x / y, "max": torch.maximum, "min": torch.minimum}
LEAVES = ("acc", "alpha", "beta", "C", "residual")


def epilogue_data_dir():
    """Where epilogues/named.json and activations.json are: beside this file in a composed folder, else FACT's data."""
    here = Path(__file__).resolve().parent / "epilogues"
    if here.is_dir():
        return here
    home = os.environ.get("FACT_HOME")
    root = Path(home) if home else Path(__file__).resolve().parents[4]
    return root / "data" / "epilogues"


def load_epilogue_tables(folder=None):
    """(named trees, activation table) from the data files."""
    folder = Path(folder) if folder else epilogue_data_dir()
    named = json.loads((folder / "named.json").read_text())["epilogues"]
    activations = json.loads((folder / "activations.json").read_text())["activations"]
    return named, activations


def _number_text(v):
    text = repr(float(v))
    return text[:-2] if text.endswith(".0") else text


def tree_text(tree):
    """The canonical text of a tree, as EpilogueTree::text writes it: relu(add(mul(alpha,acc),row(bias))); an
    activation's params in name order: leaky_relu[negative_slope=0.1](acc)."""
    if isinstance(tree, (int, float)) and not isinstance(tree, bool):
        return _number_text(tree)
    if isinstance(tree, str):
        return tree
    if isinstance(tree, dict):
        (kind, slot), = tree.items()
        return f"{kind}({slot})"
    if len(tree) == 3 and isinstance(tree[2], dict) and tree[0] not in BINARY_OPS:
        params = ",".join(f"{k}={_number_text(v)}" for k, v in sorted(tree[2].items()))
        return f"{tree[0]}[{params}]({tree_text(tree[1])})"
    return f"{tree[0]}({','.join(tree_text(x) for x in tree[1:])})"


def _operands(tree):
    """A node's operand trees (an activation's params object is not one)."""
    return tree[1:] if tree[0] in BINARY_OPS else tree[1:2]


def tree_leaves(tree):
    """The leaves a tree reads: "acc", "alpha", "beta", "C", "residual", "row", "col" (any slot), "scalar" (numbers
    left out)."""
    if isinstance(tree, str):
        return {tree}
    if isinstance(tree, dict):
        return set(tree)
    if isinstance(tree, list):
        return set().union(*(tree_leaves(x) for x in _operands(tree)))
    return set()


def tree_slots(tree):
    """{slot: broadcast} for every vector slot the tree reads: {"bias": "row", "vec0": "col", "vec1": "scalar"}."""
    if isinstance(tree, dict):
        (kind, slot), = tree.items()
        return {slot: kind}
    if isinstance(tree, list):
        out = {}
        for x in _operands(tree):
            out.update(tree_slots(x))
        return out
    return {}


def vector_slots(tree):
    """The vec<i> slots the tree reads, in slot order: the op's `vectors` argument, one tensor each."""
    slots = tree_slots(tree)
    return [s for s in VECTOR_SLOTS if s in slots]


def check_tree(tree, activations):
    """ValueError naming the bad node unless `tree` is a well-formed epilogue tree over these activations."""
    if isinstance(tree, bool):
        raise ValueError(f"epilogue tree node {tree!r} is not a node")
    if isinstance(tree, (int, float)):
        return
    if isinstance(tree, str):
        if tree not in LEAVES:
            raise ValueError(f"epilogue tree leaf {tree!r}: use one of {', '.join(LEAVES)}, a number, "
                             f"{{'row': 'bias'}}, {{'col': 'bias'}}, [activation, x] or [op, x, y]")
        return
    if isinstance(tree, dict):
        (kind, slot), = tree.items() if len(tree) == 1 else ((None, None),)
        if kind not in BROADCASTS or slot not in ("bias",) + VECTOR_SLOTS or (kind == "scalar" and slot == "bias"):
            raise ValueError(f"epilogue tree node {tree!r}: broadcasts are {{'row': slot}} and {{'col': slot}} with slot "
                             f"'bias' or 'vec0'..'vec{MAX_VECTORS - 1}', and {{'scalar': 'vec<i>'}}")
        return
    if not isinstance(tree, list) or not tree or not isinstance(tree[0], str):
        raise ValueError(f"epilogue tree node {tree!r}: use [activation, x] or [op, x, y]")
    head = tree[0]
    if head in BINARY_OPS:
        if len(tree) != 3:
            raise ValueError(f"epilogue tree node {tree!r}: [{head!r}, x, y] takes two operands")
    elif head in activations:
        if len(tree) not in (2, 3) or len(tree) == 3 and not isinstance(tree[2], dict):
            raise ValueError(f"epilogue tree node {tree!r}: an activation takes one operand and, when it has params, "
                             f"an object {{param: number}}")
        given = tree[2] if len(tree) == 3 else {}
        wanted = activations[head].get("params") or {}
        for p, v in given.items():
            if p not in wanted:
                raise ValueError(f"epilogue tree node {tree!r}: activation {head!r} has no param {p!r}; its params: "
                                 f"{', '.join(wanted) or 'none'}")
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"epilogue tree node {tree!r}: param {p!r} of activation {head!r} is {v!r}, not a number")
        for p in wanted:
            if p not in given:
                raise ValueError(f"epilogue tree node {tree!r}: activation {head!r} needs every param given: {p!r} is "
                                 f"missing")
        check_tree(tree[1], activations)
        return
    else:
        raise ValueError(f"epilogue tree node {tree!r}: {head!r} is neither a binary op ({', '.join(BINARY_OPS)}) "
                         f"nor an activation of the table ({', '.join(sorted(activations))})")
    for x in tree[1:]:
        check_tree(x, activations)


def apply_activation(x, entry, params=None):
    """The activation's aten op as the table names it: torch.ops.aten.<aten>(x, *params in "args" order, **kwargs);
    a param the node does not give takes the table's default."""
    torch_spec = entry["torch"]
    values = {**(entry.get("params") or {}), **(params or {})}
    args = [values[name] for name in torch_spec.get("args", [])]
    return getattr(torch.ops.aten, torch_spec["aten"])(x, *args, **torch_spec.get("kwargs", {}))


LINEAR = ["add", ["mul", "alpha", "acc"], {"row": "bias"}]


def evaluate_epilogue(tree, activations, leaf, linear=None):
    """The tree's value. leaf(name) gives "acc", "alpha", "beta", "C", "residual", "row" and "col" (the bias,
    shaped to broadcast), and "row:vec<i>", "col:vec<i>", "scalar:vec<i>" (a vector slot); None for an absent tensor (C without beta): a product with it is absent, a sum takes the
    other operand. A product with the number 1 is its other operand. linear(), when given, computes the subtree
    alpha * acc + bias[N] the way PyTorch runs a Linear (addmm), for baselines."""
    if linear is not None and tree == LINEAR:
        return linear()
    if isinstance(tree, (int, float)):
        return float(tree)
    if isinstance(tree, str):
        return leaf(tree)
    if isinstance(tree, dict):
        (kind, slot), = tree.items()
        return leaf(kind) if slot == "bias" else leaf(f"{kind}:{slot}")
    if tree[0] in BINARY_OPS:
        x = evaluate_epilogue(tree[1], activations, leaf, linear)
        y = evaluate_epilogue(tree[2], activations, leaf, linear)
        if tree[0] == "mul":
            if x is None or y is None:
                return None
            if isinstance(x, float) and x == 1.0:
                return y
            if isinstance(y, float) and y == 1.0:
                return x
        if tree[0] == "add" and (x is None or y is None):
            return y if x is None else x
        if x is None or y is None:
            raise ValueError(f"epilogue {tree_text(tree)}: an operand is absent (C without beta)")
        if isinstance(x, float) and isinstance(y, float):
            return float(BINARY_OPS[tree[0]](torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)))
        if isinstance(x, float) and tree[0] in ("max", "min"):
            x = torch.full_like(y, x)
        if isinstance(y, float) and tree[0] in ("max", "min"):
            y = torch.full_like(x, y)
        return BINARY_OPS[tree[0]](x, y)
    x = evaluate_epilogue(tree[1], activations, leaf, linear)
    if isinstance(x, float):
        x = torch.tensor(x, dtype=torch.float64)
    return apply_activation(x, activations[tree[0]], tree[2] if len(tree) == 3 else None)


def epilogue_leaves(acc, bias, residual, what, vectors=None, rows=None, row_shape=(-1,)):
    """The tree's leaves for these tensors (residual already shaped like acc): the kernel runs with alpha = 1,
    beta = 0 and no C. vectors: {"vec<i>": tensor} of the vector slots, flat (row [N], col [rows of acc], scalar
    [1]), shaped here to broadcast; rows: the leading dims of the output ([M] or [batch, M]) when acc is None.
    row_shape: how a row vector (the bias, a row vec<i>) broadcasts, [N] for a GEMM's [..., N] output, (-1, 1, 1)
    for a channels-first convolution's [n, N, h, w]. `what` names the op or problem in the error when the tree reads
    a tensor not passed."""
    def leaf(name):
        if ":" in name:  # "row:vec0", "col:vec1", "scalar:vec2"
            kind, slot = name.split(":")
            v = (vectors or {}).get(slot)
            if v is None:
                raise ValueError(f"{what} reads vector slot {slot}, but none was passed")
            if kind == "row":
                return v.reshape(row_shape)
            if kind == "scalar":
                return v.reshape(())
            lead = tuple(acc.shape[:-1]) if acc is not None else tuple(rows or (v.numel(),))
            return v.reshape(*lead, 1)
        if name == "acc":
            return acc
        if name in ("alpha", "beta"):
            return 1.0 if name == "alpha" else 0.0
        if name == "C":
            return None
        if name == "residual":
            if residual is None:
                raise ValueError(f"{what} reads the residual slot, but none was passed")
            return residual
        if bias is None:
            raise ValueError(f"{what} reads a bias vector, but none was passed")
        return bias.reshape(row_shape) if name == "row" else bias.reshape(-1, 1)
    return leaf


def _gemm(tree, activations, key):
    slots = vector_slots(tree)

    def gemm(a, b, bias, residual, vectors=(), b_constant=False):
        del b_constant  # the CUDA op's caching hint
        acc = torch.matmul(a, b)
        if len(vectors) != len(slots):
            raise ValueError(f"{key} reads {len(slots)} vectors ({', '.join(slots) or 'none'}), got {len(vectors)}")
        leaf = epilogue_leaves(acc, bias, None if residual is None else residual.reshape(acc.shape), key,
                               dict(zip(slots, vectors)))
        return evaluate_epilogue(tree, activations, leaf).contiguous()

    return gemm


def reference_op(entry):
    """(schema, implementation, key) of a GEMM op's manifest entry; the key is its epilogue."""
    epilogue = entry.get("epilogue") or "none"
    tree, activations = entry.get("epilogue_tree"), entry.get("activations")
    if tree is None or activations is None:  # a manifest without them: the data files have the tables
        named, table = load_epilogue_tables()
        activations = {**table, **(activations or {})}
    if tree is None:
        if isinstance(epilogue, str):
            if epilogue not in named:
                raise ValueError(f"op {entry['op']}: epilogue '{epilogue}' has no reference implementation; "
                                 f"known: {sorted(named)}, or an epilogue tree")
            tree = named[epilogue]
        else:
            tree = epilogue
    try:
        check_tree(tree, activations)
    except ValueError as e:
        raise ValueError(f"op {entry['op']}: epilogue {tree!r}: {e}") from None
    name = epilogue if isinstance(epilogue, str) else tree_text(tree)
    key = f"gemm epilogue {name}"
    return SCHEMA_WITH_VECTORS if vector_slots(tree) else SCHEMA, _gemm(tree, activations, key), key
