"""The kernel families and their measurement cases, read from data/families/<name>.json: the family's
name (the C++ KernelFamily's, request.family) and "python_case", the module imported when the family is
first used. Each case module defines parse_problem(obj, where) and Case (measure_case.py)."""
from __future__ import annotations

import importlib

from .family_data import FamilyDataError, read_family_files  # noqa: F401 (FamilyDataError: callers catch it here)


def read_case_modules() -> dict[str, str]:
    """family name -> python_case module, in file-name order."""
    out = {}
    for family, (path, obj) in read_family_files().items():
        module = obj.get("python_case")
        if not isinstance(module, str) or not module.startswith("fact."):
            raise FamilyDataError(f"{path}: \"python_case\" must name the family's measurement case module "
                                  f"(fact.realize.<x>_case), got {module!r}")
        out[family] = module
    return out


CASE_MODULES = read_case_modules()
FAMILIES = tuple(CASE_MODULES)


def case_module(family: str):
    if family not in CASE_MODULES:
        raise ValueError(f"{family!r} is not one of {', '.join(FAMILIES)}")
    return importlib.import_module(CASE_MODULES[family])


def parse_family_problem(family: str, obj, where: str):
    """The family's problem; raises problem_fields.ProblemError (a ValueError) naming the field."""
    return case_module(family).parse_problem(obj, where)


def case_for(family: str, problem):
    return case_module(family).Case(problem)
