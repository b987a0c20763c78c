"""Checks of the fields of a measurement request and of its family's problem (request.problem), shared by
measure_request.py and the family cases: each error names the field it rejects and what is allowed."""
from __future__ import annotations


class ProblemError(ValueError):
    """The problem JSON is malformed; the message names the field and what is allowed."""


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
