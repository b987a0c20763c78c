"""The request `fact tune` sends to `python -m fact.realize.measure`: parsing and validation.

Every error is a RequestError whose message names the field (as a JSON path) and what is allowed.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .kernel_abi import KERNEL_ID_PATTERN

LAYOUTS = ("row", "col")
DTYPES = ("float32", "bfloat16", "float16")
NUMERICS = ("fp32", "3xtf32", "tf32", "bf16", "fp16")
EPILOGUES = ("none", "bias", "bias_relu", "bias_silu", "bias_gelu_erf", "bias_gelu_tanh", "bias_residual",
             "bias_silu_mul")
# Which numerics modes an operand dtype admits: fp32 tensors can be multiplied in full fp32,
# in 3xTF32 (fp32-accurate on tensor cores) or in TF32; bf16/fp16 tensors only in their own type.
NUMERICS_FOR_DTYPE = {"float32": ("fp32", "3xtf32", "tf32"), "bfloat16": ("bf16",), "float16": ("fp16",)}
DEFAULT_NUMERICS = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}

PROBLEM_KEYS = ("m", "n", "k", "batch", "layout_a", "layout_b", "dtype", "numerics", "epilogue")
REQUEST_KEYS = ("family", "problem", "candidates", "trials", "baseline", "warmup_ms", "rep_ms", "timeout_s")


class RequestError(Exception):
    """The request JSON is malformed; the message names the field and the fix."""


@dataclass(frozen=True)
class GemmProblem:
    m: int
    n: int
    k: int
    batch: int
    layout_a: str
    layout_b: str
    dtype: str
    numerics: str
    epilogue: str

    def to_json(self) -> dict:
        return asdict(self)

    @property
    def has_bias(self) -> bool:
        return self.epilogue != "none"

    @property
    def has_residual(self) -> bool:
        """Whether the kernel reads a tensor shaped like D through the residual slot (a residual, or U)."""
        return self.epilogue in ("bias_residual", "bias_silu_mul")

    @property
    def swiglu(self) -> bool:
        """silu(A @ B + bias) * U, with U = A @ B_up + bias_up (SwiGLU's up projection) computed first."""
        return self.epilogue == "bias_silu_mul"

    @property
    def activation(self) -> str:
        """The activation after the bias: none, relu, silu, gelu_erf or gelu_tanh."""
        if self.epilogue in ("none", "bias", "bias_residual"):
            return "none"
        if self.swiglu:
            return "silu"
        return self.epilogue[len("bias_"):]


@dataclass(frozen=True)
class Candidate:
    id: str
    library: str


@dataclass(frozen=True)
class MeasureRequest:
    problem: GemmProblem  # or the family's problem (norm_case.NormProblem, attention_case.AttentionProblem)
    candidates: tuple[Candidate, ...] = field(default_factory=tuple)
    trials: int = 3
    baseline: bool = True
    warmup_ms: float = 25.0
    rep_ms: float = 200.0
    timeout_s: float = 60.0  # per candidate, verification and timing together
    family: str = "gemm"     # which kernel family (family_cases.py); GEMM requests may leave it out

    def to_json(self) -> dict:
        return {
            **({} if self.family == "gemm" else {"family": self.family}),
            "problem": self.problem.to_json(),
            "candidates": [asdict(c) for c in self.candidates],
            "trials": self.trials, "baseline": self.baseline,
            "warmup_ms": self.warmup_ms, "rep_ms": self.rep_ms, "timeout_s": self.timeout_s,
        }


def _check_keys(obj: dict, allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise RequestError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")


def _positive_int(obj: dict, key: str, where: str, default: int | None = None) -> int:
    if key not in obj:
        if default is None:
            raise RequestError(f"{where}.{key}: missing (a positive integer)")
        return default
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RequestError(f"{where}.{key}: {value!r} is not a positive integer")
    return value


def _positive_number(obj: dict, key: str, where: str, default: float) -> float:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise RequestError(f"{where}.{key}: {value!r} is not a positive number")
    return float(value)


def _choice(obj: dict, key: str, where: str, allowed: tuple[str, ...], default: str | None = None) -> str:
    if key not in obj:
        if default is None:
            raise RequestError(f"{where}.{key}: missing (one of {', '.join(allowed)})")
        return default
    value = obj[key]
    if value not in allowed:
        raise RequestError(f"{where}.{key}: {value!r} is not one of {', '.join(allowed)}")
    return value


def parse_problem(obj, where: str = "request.problem") -> GemmProblem:
    if not isinstance(obj, dict):
        raise RequestError(f"{where}: expected an object with keys {', '.join(PROBLEM_KEYS)}")
    _check_keys(obj, PROBLEM_KEYS, where)
    dtype = _choice(obj, "dtype", where, DTYPES)
    numerics = _choice(obj, "numerics", where, NUMERICS, DEFAULT_NUMERICS[dtype])
    if numerics not in NUMERICS_FOR_DTYPE[dtype]:
        raise RequestError(f"{where}.numerics: {numerics!r} does not go with dtype {dtype!r}; "
                           f"allowed for {dtype}: {', '.join(NUMERICS_FOR_DTYPE[dtype])}")
    return GemmProblem(
        m=_positive_int(obj, "m", where), n=_positive_int(obj, "n", where), k=_positive_int(obj, "k", where),
        batch=_positive_int(obj, "batch", where, default=1),
        layout_a=_choice(obj, "layout_a", where, LAYOUTS, "row"),
        layout_b=_choice(obj, "layout_b", where, LAYOUTS, "row"),
        dtype=dtype, numerics=numerics,
        epilogue=_choice(obj, "epilogue", where, EPILOGUES, "none"),
    )


def parse_candidates(value, where: str = "request.candidates") -> tuple[Candidate, ...]:
    if not isinstance(value, list):
        raise RequestError(f"{where}: expected a list of {{\"id\", \"library\"}} objects")
    seen: set[str] = set()
    out = []
    for i, c in enumerate(value):
        w = f"{where}[{i}]"
        if not isinstance(c, dict):
            raise RequestError(f"{w}: expected an object with keys id, library")
        _check_keys(c, ("id", "library"), w)
        cid, lib = c.get("id"), c.get("library")
        if not isinstance(cid, str) or not KERNEL_ID_PATTERN.match(cid):
            raise RequestError(f"{w}.id: {cid!r} must be a non-empty string of [A-Za-z0-9_] "
                               f"(it names the exported symbols fact_<id>_run etc.)")
        if cid in seen:
            raise RequestError(f"{w}.id: {cid!r} appears twice; ids must be unique")
        seen.add(cid)
        if not isinstance(lib, str) or not Path(lib).is_absolute():
            raise RequestError(f"{w}.library: {lib!r} must be an absolute path to the candidate's .so")
        out.append(Candidate(id=cid, library=lib))
    return tuple(out)


def parse_request(obj) -> MeasureRequest:
    if not isinstance(obj, dict):
        raise RequestError("request: expected a JSON object with keys problem, candidates, ...")
    _check_keys(obj, REQUEST_KEYS, "request")
    if "problem" not in obj:
        raise RequestError("request.problem: missing")
    baseline = obj.get("baseline", True)
    if not isinstance(baseline, bool):
        raise RequestError(f"request.baseline: {baseline!r} is not true or false")
    from .family_cases import FAMILIES, parse_family_problem
    family = obj.get("family", "gemm")
    if family not in FAMILIES:
        raise RequestError(f"request.family: {family!r} is not one of {', '.join(FAMILIES)}")
    if family == "gemm":
        problem = parse_problem(obj["problem"])
    else:
        try:
            problem = parse_family_problem(family, obj["problem"], "request.problem")
        except ValueError as e:
            raise RequestError(str(e)) from e
    return MeasureRequest(
        family=family,
        problem=problem,
        candidates=parse_candidates(obj.get("candidates", [])),
        trials=_positive_int(obj, "trials", "request", default=3),
        baseline=baseline,
        warmup_ms=_positive_number(obj, "warmup_ms", "request", 25.0),
        rep_ms=_positive_number(obj, "rep_ms", "request", 200.0),
        timeout_s=_positive_number(obj, "timeout_s", "request", 60.0),
    )


def load_request(path: str | Path) -> MeasureRequest:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise RequestError(f"{path}: cannot read the request ({e.strerror})") from e
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise RequestError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from e
    try:
        return parse_request(obj)
    except RequestError as e:
        raise RequestError(f"{path}: {e}") from e
