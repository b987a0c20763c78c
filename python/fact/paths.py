"""Where FACT's data lives, found as src/core/paths.cpp finds it: $FACT_HOME when it is set; else, in an installed
package, the data beside its code (fact/_share, pyproject.toml); else the checkout this package sits in
(python/fact/paths.py -> the repository root)."""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
INSTALLED_SHARE = PACKAGE_DIR / "_share"  # data/ and templates/ of an installed wheel
SOURCE_ROOT = PACKAGE_DIR.parents[1]


def fact_home() -> Path:
    home = os.environ.get("FACT_HOME")
    if home:
        return Path(home)
    return INSTALLED_SHARE if INSTALLED_SHARE.is_dir() else SOURCE_ROOT


def data_dir() -> Path:
    return fact_home() / "data"


def templates_dir() -> Path:
    return fact_home() / "templates"
