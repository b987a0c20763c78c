"""Where FACT's data lives, found as src/core/paths.cpp finds it: $FACT_HOME/data when FACT_HOME is set,
else the data/ folder of the checkout this package sits in (python/fact/paths.py -> the repository root)."""
from __future__ import annotations

import os
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[2]


def fact_home() -> Path:
    home = os.environ.get("FACT_HOME")
    return Path(home) if home else SOURCE_ROOT


def data_dir() -> Path:
    return fact_home() / "data"
