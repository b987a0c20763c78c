"""The request `fact tune` sends to `python -m fact.realize.measure`: parsing and validation.

request.family names the kernel family (family_cases.py), whose case parses request.problem. Every error is
a RequestError whose message names the field (as a JSON path) and what is allowed.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .family_cases import FAMILIES, parse_family_problem
from .kernel_abi import KERNEL_ID_PATTERN
from .problem_fields import check_keys, flag, integer, positive_number

REQUEST_KEYS = ("family", "problem", "candidates", "trials", "baseline", "warmup_ms", "rep_ms", "timeout_s")
# Requests written before they named their family are GEMM requests.
DEFAULT_FAMILY = "gemm"


class RequestError(Exception):
    """The request JSON is malformed; the message names the field and the fix."""


@dataclass(frozen=True)
class Candidate:
    id: str
    library: str
    kernel: str = ""      # the library's symbols are fact_<kernel>_*; "" = id (run-time variants share a kernel)
    arguments: dict = field(default_factory=dict)  # argument-struct fields set before each call (a GEMM's swizzle)

    @property
    def symbols(self) -> str:
        return self.kernel or self.id


@dataclass(frozen=True)
class MeasureRequest:
    family: str               # which kernel family (family_cases.py)
    problem: object           # the family's problem (gemm_case.GemmProblem, norm_case.NormProblem, ...)
    candidates: tuple[Candidate, ...] = field(default_factory=tuple)
    trials: int = 3
    baseline: bool = True
    warmup_ms: float = 25.0
    rep_ms: float = 200.0
    timeout_s: float = 60.0  # per candidate, verification and timing together

    def to_json(self) -> dict:
        return {
            "family": self.family,
            "problem": self.problem.to_json(),
            "candidates": [{k: v for k, v in asdict(c).items() if v or k in ("id", "library")}
                           for c in self.candidates],
            "trials": self.trials, "baseline": self.baseline,
            "warmup_ms": self.warmup_ms, "rep_ms": self.rep_ms, "timeout_s": self.timeout_s,
        }


def parse_candidates(value, where: str = "request.candidates") -> tuple[Candidate, ...]:
    if not isinstance(value, list):
        raise RequestError(f"{where}: expected a list of {{\"id\", \"library\"}} objects")
    seen: set[str] = set()
    out = []
    for i, c in enumerate(value):
        w = f"{where}[{i}]"
        if not isinstance(c, dict):
            raise RequestError(f"{w}: expected an object with keys id, library (and optionally kernel, arguments)")
        try:
            check_keys(c, ("id", "library", "kernel", "arguments"), w)
        except ValueError as e:
            raise RequestError(str(e)) from e
        cid, lib = c.get("id"), c.get("library")
        if not isinstance(cid, str) or not KERNEL_ID_PATTERN.match(cid):
            raise RequestError(f"{w}.id: {cid!r} must be a non-empty string of [A-Za-z0-9_] "
                               f"(it names the exported symbols fact_<id>_run etc.)")
        if cid in seen:
            raise RequestError(f"{w}.id: {cid!r} appears twice; ids must be unique")
        seen.add(cid)
        if not isinstance(lib, str) or not Path(lib).is_absolute():
            raise RequestError(f"{w}.library: {lib!r} must be an absolute path to the candidate's .so")
        kernel = c.get("kernel", "")
        if not isinstance(kernel, str) or (kernel and not KERNEL_ID_PATTERN.match(kernel)):
            raise RequestError(f"{w}.kernel: {kernel!r} must be a string of [A-Za-z0-9_] (the library's symbols "
                               f"fact_<kernel>_run etc.; omit it when they are fact_<id>_*)")
        arguments = c.get("arguments", {})
        if not isinstance(arguments, dict) or not all(
                isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
                for k, v in arguments.items()):
            raise RequestError(f"{w}.arguments: {arguments!r} must map argument-struct field names to numbers")
        out.append(Candidate(id=cid, library=lib, kernel=kernel, arguments=dict(arguments)))
    return tuple(out)


def parse_request(obj) -> MeasureRequest:
    if not isinstance(obj, dict):
        raise RequestError("request: expected a JSON object with keys family, problem, candidates, ...")
    try:
        check_keys(obj, REQUEST_KEYS, "request")
        if "problem" not in obj:
            raise RequestError("request.problem: missing")
        family = obj.get("family", DEFAULT_FAMILY)
        if family not in FAMILIES:
            raise RequestError(f"request.family: {family!r} is not one of {', '.join(FAMILIES)}")
        return MeasureRequest(
            family=family,
            problem=parse_family_problem(family, obj["problem"], "request.problem"),
            candidates=parse_candidates(obj.get("candidates", [])),
            trials=integer(obj, "trials", "request", default=3),
            baseline=flag(obj, "baseline", "request", default=True),
            warmup_ms=positive_number(obj, "warmup_ms", "request", 25.0),
            rep_ms=positive_number(obj, "rep_ms", "request", 200.0),
            timeout_s=positive_number(obj, "timeout_s", "request", 60.0),
        )
    except ValueError as e:  # problem_fields.ProblemError
        raise RequestError(str(e)) from e


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
