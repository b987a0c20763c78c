"""The kernel families' data files, data/families/<name>.json (found as the C++ finds them: $FACT_HOME/data, else
this checkout's): the one list of families, read here for the measurement cases (family_cases.py) and the ABI
mirror (kernel_abi.py)."""
from __future__ import annotations

import json
from pathlib import Path

from fact.paths import data_dir


class FamilyDataError(Exception):
    """A family data file is missing or malformed; the message names the file and the field."""


def read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise FamilyDataError(f"{path}: cannot read the {what} ({e})") from e


def read_family_files() -> dict[str, tuple[Path, dict]]:
    """family name -> (its data file, the file's object), in file-name order (the C++ registry's order)."""
    folder = data_dir() / "families"
    files = sorted(folder.glob("*.json"))
    if not files:
        raise FamilyDataError(f"{folder}: no family data files; set FACT_HOME to a FACT checkout (its data/ folder)")
    out = {}
    for path in files:
        obj = read_json(path, "family data")
        # As src/realize/kernel_family.cpp: a family's file is named after it.
        if not isinstance(obj, dict) or obj.get("family") != path.stem:
            raise FamilyDataError(f"{path}: \"family\" must be \"{path.stem}\"")
        out[path.stem] = (path, obj)
    return out
