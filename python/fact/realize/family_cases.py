"""The kernel families and their measurement cases, read from data/families/<name>.json: the family's
name (the C++ KernelFamily's, request.family) and "python_case", the module imported when the family is
first used. Each case module defines parse_problem(obj, where) and Case (measure_case.py)."""
from __future__ import annotations

import importlib
import json

from fact.paths import data_dir


class FamilyDataError(Exception):
    """A family data file is missing or malformed; the message names the file and the field."""


def read_case_modules() -> dict[str, str]:
    """family name -> python_case module, in file-name order."""
    folder = data_dir() / "families"
    files = sorted(folder.glob("*.json"))
    if not files:
        raise FamilyDataError(f"{folder}: no family data files; set FACT_HOME to a FACT checkout (its data/ folder)")
    out = {}
    for path in files:
        try:
            obj = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise FamilyDataError(f"{path}: cannot read the family data ({e})") from e
        # As src/realize/kernel_family.cpp: a family's file is named after it.
        if not isinstance(obj, dict) or obj.get("family") != path.stem:
            raise FamilyDataError(f"{path}: \"family\" must be \"{path.stem}\"")
        module = obj.get("python_case")
        if not isinstance(module, str) or not module.startswith("fact."):
            raise FamilyDataError(f"{path}: \"python_case\" must name the family's measurement case module "
                                  f"(fact.realize.<x>_case), got {module!r}")
        out[path.stem] = module
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
