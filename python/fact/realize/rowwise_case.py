"""The rowwise family's measurement case: a row-wise kernel generated from the IR ("generated": true) or a
registered one (FactRowwiseArgs ABI) against the
fragment it stands for (fact-rowwise-fragment JSON from its registry record), replayed with PyTorch's ATen
ops in float64 as the reference and in the kernel's dtype as the baseline (PyTorch's own ops, one launch
each, as the module ran them). A [cols] input (broadcast) is one row shared by every row (row stride 0); a
per-channel one ("channel") is read whole by every row too.
"""
from __future__ import annotations

import functools
import math
import json
from dataclasses import dataclass, replace

from fact.agent.fragment_replay import bytes_moved, replay
from fact.agent.verify_rowwise import TOLERANCE

from . import verify
from .kernel_abi import FACT_ROWWISE_MAX_INPUTS, FactRowwiseArgs
from .measure_case import MeasureCase
from .problem_fields import ProblemError, check_keys, integer
from ..paths import data_dir

ODD_ROWS = 37  # verify variant: a row count no block tiling divides
ODD_OUTER = 3  # verify variant of strided rows: an odd count of their blocks of inner rows
REFERENCE_CHUNK = 1 << 26  # elements per float64 replay slice of a large problem (512 MB per tensor it makes)
DTYPES = tuple(TOLERANCE)
ODD_COLS = 33  # verify variant of a flat pointwise kernel: with ODD_ROWS, an odd element count (scalar tail)
PROBLEM_KEYS = ("entry", "rows", "cols", "dtype", "numerics", "fragment", "generated", "any_cols", "takes_row_views")
ROW_VIEW_STEP = 16  # verify variant of a kernel taking row views: full inputs' rows padded to a multiple of 16 elements


@dataclass(frozen=True)
class RowwiseProblem:
    entry: str
    rows: int
    cols: int
    dtype: str
    numerics: str
    fragment: dict
    generated: bool = False
    any_cols: bool = False  # a flat pointwise kernel: takes any row length
    takes_row_views: bool = False  # full inputs may be views whose rows lie a stride apart (a narrow of the last dim)
    as_row_views: bool = False  # verify variant: full inputs are such views, their rows 16-byte aligned

    def to_json(self) -> dict:
        d = {"entry": self.entry, "rows": self.rows, "cols": self.cols, "dtype": self.dtype,
             "numerics": self.numerics, "fragment": self.fragment}
        if self.generated:
            d["generated"] = True
        if self.any_cols:
            d["any_cols"] = True
        if self.takes_row_views:
            d["takes_row_views"] = True
        return d

    def input_shape(self, spec: dict) -> tuple:
        """An input's shape at this row count: broadcast rows as recorded, a pool's input (window) with its first dim
        the samples', full ones with their leading dims folded into the first (rank kept, so the fragment's dims still
        name the same axes), one value per row as a full one with the reduced dims kept as 1 or dropped, as recorded."""
        if spec.get("window"):
            return tuple([self.rows // self.block()] + list(spec["shape"][1:]))
        if spec.get("per_row"):
            full = list(self.input_shape({"name": spec["name"]}))
            first, trailing = self.lead_dims(), int(self.fragment.get("trailing_dims", 1))
            kept = len(spec["shape"]) == len(full)
            return tuple(full[:first] + [1] * (trailing if kept else 0) + full[first + trailing:])
        if spec.get("broadcast"):
            return tuple(spec["shape"])
        full = list(self.fragment.get("full_shape") or [self.fragment["rows"], self.cols])
        lead = self.lead_dims()
        if self.any_cols:  # one trailing dim: the row length may differ from the fragment's
            full[-1] = self.cols
        if lead == 0:  # nothing before the reduced dims: one block of inner rows
            return tuple(full)
        if self.whole_samples():  # the channels (dim 1) stay whole: a row count is whole samples
            return tuple([self.rows // self.block()] + full[1:])
        return tuple([1] * (lead - 1) + [self.rows // self.block()] + full[lead:])

    def whole_samples(self) -> bool:
        """Per-channel inputs (the channels stay whole) or pools (the pooled dims stay whole): a row count is whole
        samples (positions of dim 0)."""
        return any("channel" in s or s.get("window") for s in self.fragment["inputs"])

    def inner(self) -> int:
        """Elements between a row's elements: 1 for contiguous rows, else the count of the dims behind the reduced
        ones (rows are then outer x inner, and a row count is a multiple of it)."""
        return int(self.fragment.get("inner", 1))

    def block(self) -> int:
        """Rows per position of the dims before the reduced ones: inner rows, or group_norm's groups; with per-channel
        inputs, rows per sample (the dims between the first and the reduced ones, channels among them, stay whole);
        with a pool, rows per sample."""
        full = self.fragment.get("full_shape") or []
        if self._pools():  # rows per sample: every dim after the first stays whole (the pooled ones as generated)
            return self.fragment["rows"] if self.lead_dims() == 0 else math.prod(full[1:]) // self.cols
        b = self.inner() * int(self.fragment.get("groups", 1))
        if self.whole_samples():
            for d in full[1:max(self.lead_dims(), 1)]:
                b *= d
        return b

    def _pools(self) -> bool:
        return any(s.get("window") for s in self.fragment["inputs"])

    def lead_dims(self) -> int:
        """How many dims of the full tensor come before the reduced ones."""
        rank = len(self.fragment.get("full_shape") or [self.fragment["rows"], self.cols])
        return rank - self.fragment.get("trailing_dims", 1) - self.fragment.get("inner_dims", 0)

    def output_per_row(self) -> bool:
        if self.any_cols:
            return False
        out = next(n for n in self.fragment["nodes"] if n["name"] == self.fragment["output"])
        shape = out["outputs"][0]["shape"]
        n = 1
        for d in shape:
            n *= d
        return n == self.fragment["rows"] and n != self.fragment["rows"] * self.cols

    def out_cols(self) -> int:
        """Elements of an output row: 1 (one value per row), else cols and, where the fragment ends in a pad of its
        rows, the pad's columns (the output's elements per row as the fragment records them)."""
        if self.output_per_row():
            return 1
        if self.any_cols:
            return self.cols
        out = next(n for n in self.fragment["nodes"] if n["name"] == self.fragment["output"])
        return math.prod(out["outputs"][0]["shape"]) // self.fragment["rows"]

    def out_elements(self) -> int:
        return self.rows * self.out_cols()


def parse_problem(obj, where: str = "request.problem") -> RowwiseProblem:
    check_keys(obj, PROBLEM_KEYS, where)
    for key in ("rows", "cols"):
        integer(obj, key, where)
    if obj.get("dtype") not in DTYPES:
        raise ProblemError(f"{where}.dtype: {obj.get('dtype')!r} is not one of {', '.join(DTYPES)}")
    generated = obj.get("generated", False)
    if not isinstance(generated, bool):
        raise ProblemError(f"{where}.generated: expected true or false")
    if not isinstance(obj.get("entry"), str) or (not obj["entry"] and not generated):
        raise ProblemError(f"{where}.entry: the registry entry's name is required")
    numerics = obj.get("numerics")
    if numerics not in verify.BASE_TOLERANCE:
        raise ProblemError(f"{where}.numerics: {numerics!r} is not one of {', '.join(verify.BASE_TOLERANCE)}")
    f = obj.get("fragment")
    if not isinstance(f, dict) or f.get("format") != "fact-rowwise-fragment":
        raise ProblemError(f"{where}.fragment: expected a fact-rowwise-fragment object (the registry record's)")
    inputs = f.get("inputs")
    if not isinstance(inputs, list) or not 1 <= len(inputs) <= FACT_ROWWISE_MAX_INPUTS:
        raise ProblemError(f"{where}.fragment.inputs: 1 to {FACT_ROWWISE_MAX_INPUTS} inputs, got {inputs!r}")
    any_cols = obj.get("any_cols", False)
    if not isinstance(any_cols, bool):
        raise ProblemError(f"{where}.any_cols: expected true or false")
    if (f.get("cols") != obj["cols"] and not any_cols) or f.get("dtype") != obj["dtype"]:
        raise ProblemError(f"{where}.fragment: its cols/dtype ({f.get('cols')}, {f.get('dtype')}) differ from the "
                           f"problem's ({obj['cols']}, {obj['dtype']})")
    inner, groups = f.get("inner", 1), f.get("groups", 1)
    if not isinstance(inner, int) or not isinstance(groups, int) or inner < 1 or groups < 1 or obj["rows"] % (inner * groups):
        raise ProblemError(f"{where}.rows: {obj['rows']} rows are not whole blocks of the fragment's inner {inner!r} x "
                           f"groups {groups!r} rows")
    takes_row_views = obj.get("takes_row_views", False)
    if not isinstance(takes_row_views, bool):
        raise ProblemError(f"{where}.takes_row_views: expected true or false")
    return RowwiseProblem(entry=obj["entry"], rows=obj["rows"], cols=obj["cols"], dtype=obj["dtype"],
                          numerics=numerics, fragment=f, generated=generated,
                          any_cols=any_cols, takes_row_views=takes_row_views)


@functools.cache
def positive_domain_ops() -> frozenset[str]:
    """The aten ops data/ir/pointwise_ops.json reads as an activation whose data/epilogues/activations.json entry
    has domain "positive" (log, sqrt, rsqrt)."""
    data = data_dir()
    ops = json.loads((data / "ir" / "pointwise_ops.json").read_text())["ops"]
    acts = json.loads((data / "epilogues" / "activations.json").read_text())["activations"]
    return frozenset(op for op, form in ops.items()
                     if acts.get(form.get("activation", ""), {}).get("domain") == "positive")


def reads_positive_domain(fragment: dict) -> bool:
    return any(n["op"] in positive_domain_ops() for n in fragment["nodes"])


@functools.cache
def variance_args() -> dict[str, int]:
    """Per aten op that data/ir/pointwise_ops.json reads as a BatchNorm, the argument index of its running variance."""
    ops = json.loads((data_dir() / "ir" / "pointwise_ops.json").read_text())["ops"]
    return {op: form["batch_norm"]["running_var"] for op, form in ops.items() if "batch_norm" in form}


def positive_inputs(fragment: dict) -> set[str]:
    """The inputs a BatchNorm of the fragment reads as its running variance: drawn positive, as a variance is (a
    negative one makes NaN on both sides)."""
    names = set()
    for n in fragment["nodes"]:
        i = variance_args().get(n["op"])
        if i is not None and i < len(n["args"]) and isinstance(n["args"][i], dict):
            names.add(n["args"][i].get("ref"))
    return names


@dataclass
class RowwiseInputs:
    inputs: list         # [rows, cols] or, broadcast, [cols], in the fragment's input order
    outputs: dict        # "out" -> (view [rows, cols], guarded flat buffer)


class RowwiseCase(MeasureCase):
    family = "rowwise"
    args_type = FactRowwiseArgs

    def _broadcast(self) -> list:
        return [bool(s.get("broadcast", False)) for s in self.problem.fragment["inputs"]]

    def _sliced(self) -> list:
        """The inputs whose dim 0 is the samples': full ones, pools' inputs and per-row ones (a broadcast row is shared)."""
        return [not s.get("broadcast", False) or bool(s.get("window") or s.get("per_row"))
                for s in self.problem.fragment["inputs"]]

    def tolerance(self) -> float:
        # The harness's: each op of the chain rounded once in the dtype (see verify_rowwise.TOLERANCE).
        return TOLERANCE[self.problem.dtype]

    def bytes_per_set(self) -> int:
        p = self.problem
        n = bytes_moved(p.fragment, p.rows, verify.torch_dtype(p.dtype).itemsize)
        # bytes_moved counts a full output; a per-row one writes one value per row.
        return n - (p.rows * p.cols - p.out_elements()) * verify.torch_dtype(p.dtype).itemsize

    def make_inputs(self, device, generator=None) -> RowwiseInputs:
        import torch
        p = self.problem
        dt = verify.torch_dtype(p.dtype)
        positive = reads_positive_domain(p.fragment)  # log(p) of a KL divergence: NaN on negative draws, on both sides
        variances = positive_inputs(p.fragment)

        def draw(s: dict):
            shape = p.input_shape(s)
            if s.get("dtype") == "bool":  # a mask: about half of it set
                return torch.rand(shape, device=device, generator=generator) < 0.5
            if s.get("dtype") == "int64":  # a gather's index: a column of the row
                return torch.randint(0, p.cols, shape, device=device, generator=generator)
            if positive or s["name"] in variances:
                return (torch.rand(shape, device=device, generator=generator) * 0.99 + 0.01).to(dt)
            return torch.randn(shape, device=device, generator=generator).to(dt)

        def as_row_view(t, s: dict):  # the rows of a wider tensor (a narrow of its last dim), each 16-byte aligned
            if not p.as_row_views or t.dim() < 2 or s.get("broadcast") or s.get("per_row") or s.get("window"):
                return t
            wide = -(-(t.shape[-1] + 1) // ROW_VIEW_STEP) * ROW_VIEW_STEP
            w = t.new_zeros((*t.shape[:-1], wide))
            if w.is_floating_point():
                w.fill_(float("nan"))  # read past the row: NaN in the output
            w[..., :t.shape[-1]] = t
            return w[..., :t.shape[-1]]

        ins = [as_row_view(draw(s), s) for s in p.fragment["inputs"]]
        g, n = verify.GUARD_ELEMENTS, p.out_elements()
        buf = torch.full((n + 2 * g,), float("nan"), device=device, dtype=dt)
        return RowwiseInputs(ins, {"out": (buf[g:g + n].view(p.rows, n // p.rows), buf)})

    def input_tensors(self, inp: RowwiseInputs) -> list:
        return list(inp.inputs)

    def kernel_args(self, inp: RowwiseInputs, stream_ptr: int) -> FactRowwiseArgs:
        p = self.problem
        a = FactRowwiseArgs()
        a.rows, a.cols, a.num_inputs = p.rows, p.cols, len(inp.inputs)
        for i, (t, b) in enumerate(zip(inp.inputs, self._broadcast())):
            a.inputs[i] = t.data_ptr()
            a.input_row_stride[i] = 0 if b else t.stride(-2) if t.dim() >= 2 and not t.is_contiguous() else p.cols
        a.output = inp.outputs["out"][0].data_ptr()
        a.output_row_stride = p.out_cols()
        a.stream = stream_ptr
        return a

    def reference(self, inp: RowwiseInputs) -> dict:
        """The fragment in float64 on the same (rounded) inputs; over slices of the leading dim when the float64
        copies of a multi-GB problem would not fit (each row's values depend on that row alone)."""
        import torch
        p = self.problem
        sliced = self._sliced()
        full = [t for t, s in zip(inp.inputs, sliced) if s]
        lead = full[0].shape[0] if full and full[0].dim() > 0 else 1
        reduced = int(p.fragment.get("trailing_dims", 1)) + int(p.fragment.get("inner_dims", 0))
        step = max(1, REFERENCE_CHUNK // max(1, full[0].numel() // lead)) if full else lead
        def f64(t):  # a mask stays bool (where() takes a bool condition; arithmetic promotes it as the kernel does), an
            return t if not t.is_floating_point() else t.double()  # index int64

        if step >= lead or full[0].dim() <= reduced:  # small, or dim 0 is reduced: one replay
            return {"out": replay(p.fragment, [f64(t) for t in inp.inputs]).reshape(p.rows, -1)}
        out = None
        for s in range(0, lead, step):
            part = replay(p.fragment, [f64(t[s:s + step]) if c else f64(t) for t, c in zip(inp.inputs, sliced)])
            if out is None:
                out = torch.empty((lead, *part.shape[1:]), dtype=part.dtype, device=part.device)
            out[s:s + step] = part
        return {"out": out.reshape(p.rows, -1)}

    def baselines(self) -> list:
        """PyTorch's ops of the fragment, in the kernel's dtype, one launch each (as the module runs them)."""
        p = self.problem
        ops = len(p.fragment["nodes"])
        return [(f"torch ops of the fragment ({ops} ops)",
                 lambda inp: {"out": replay(p.fragment, inp.inputs).reshape(p.rows, -1)})]

    def verify_variants(self) -> list:
        """The same row length at an odd row count: rows past the end are neither read nor written; a flat
        pointwise kernel also at an odd element count."""
        p = self.problem
        if p.block() > 1:  # strided rows or groups: an odd count of the dims before the reduced ones, if any
            odd = ODD_OUTER * p.block()
            return [] if p.lead_dims() == 0 or p.rows == odd else [replace(p, rows=odd)]
        out = [] if p.rows == ODD_ROWS else [replace(p, rows=ODD_ROWS)]
        if p.takes_row_views and not p.as_row_views:  # inputs as a narrow's rows, aligned: the 16-byte path over views
            out.append(replace(p, rows=ODD_ROWS, as_row_views=True))
        if p.any_cols and p.cols != ODD_COLS:
            out.append(replace(p, rows=ODD_ROWS, cols=ODD_COLS))  # odd element count: the flat kernel's scalar tail
        return out


Case = RowwiseCase
