"""Checks of the fields of a measurement request and of its family's problem (request.problem), shared by
measure_request.py and the family cases: each error names the field it rejects and what is allowed."""
from __future__ import annotations

from dataclasses import asdict


class ProblemError(ValueError):
    """The problem JSON is malformed; the message names the field and what is allowed."""


class JsonProblem:
    """Base of a family's problem dataclass: to_json() gives its fields, tuples (view strides) as JSON lists."""

    def to_json(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def check_keys(obj, keys: tuple, where: str) -> None:
    """obj is an object whose keys are all among `keys`."""
    if not isinstance(obj, dict):
        raise ProblemError(f"{where}: expected an object with keys {', '.join(keys)}")
    unknown = sorted(set(obj) - set(keys))
    if unknown:
        raise ProblemError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(keys)}")


def integer(obj: dict, key: str, where: str, default=None, minimum: int = 1) -> int:
    if key not in obj and default is None:
        raise ProblemError(f"{where}.{key}: missing (an integer >= {minimum})")
    v = obj.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ProblemError(f"{where}.{key}: {v!r} is not an integer >= {minimum}")
    return v


def positive_number(obj: dict, key: str, where: str, default=None) -> float:
    v = obj.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise ProblemError(f"{where}.{key}: {v!r} is not a positive number")
    return float(v)


def choice(obj: dict, key: str, where: str, allowed: tuple, default=None) -> str:
    if key not in obj and default is None:
        raise ProblemError(f"{where}.{key}: missing (one of {', '.join(allowed)})")
    v = obj.get(key, default)
    if v not in allowed:
        raise ProblemError(f"{where}.{key}: {v!r} is not one of {', '.join(allowed)}")
    return v


def paired_choice(obj: dict, where: str, key: str, table: dict, other: str, why: str = "") -> tuple:
    """(obj[key], obj[other]): obj[key] one of table's keys, obj[other] defaulting to table[obj[key]], the only value
    that goes with it (a family whose numerics follow the dtype, or the dtype the numerics); `why`, the family's
    reason, goes into the error with the value to use."""
    v = obj.get(key)
    if v not in tuple(table):
        raise ProblemError(f"{where}.{key}: {v!r} is not one of {', '.join(table)}")
    paired = obj.get(other, table[v])
    if paired != table[v]:
        hint = f" ({why}; use {table[v]!r})" if why else ""
        raise ProblemError(f"{where}.{other}: {paired!r} does not go with {key} {v!r}{hint}")
    return v, paired


def flag(obj: dict, key: str, where: str, default: bool = False) -> bool:
    v = obj.get(key, default)
    if not isinstance(v, bool):
        raise ProblemError(f"{where}.{key}: {v!r} is not true or false")
    return v


def bhr_strides(obj: dict, key: str, where: str) -> tuple:
    """[batch, head, row] element strides of a 4-D view (0 broadcasts)."""
    v = obj.get(key)
    if not isinstance(v, list) or len(v) != 3 or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                         for s in v):
        raise ProblemError(f"{where}.{key}: {v!r} is not [batch, head, row] element strides (>= 0)")
    return tuple(v)
