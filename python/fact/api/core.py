"""The C++ pipeline in this process (the extension module fact._core) and the environment it reads.

The core finds its data, templates and Python through FACT_HOME, FACT_PYTHON_DIR and FACT_PYTHON
(src/core/paths.cpp). A checkout's build knows its source tree; an installed package keeps data/ and templates/ in
fact/_share, so they are pointed there, and the worker Python the core starts is this interpreter.
"""
from __future__ import annotations

import os
import sys

from fact.paths import INSTALLED_SHARE, PACKAGE_DIR


class FactError(RuntimeError):
    """FACT could not do what was asked; the message names the input and the fix (the CLI prints the same)."""


def configure_environment() -> None:
    os.environ.setdefault("FACT_PYTHON", sys.executable)
    if INSTALLED_SHARE.is_dir():
        os.environ.setdefault("FACT_HOME", str(INSTALLED_SHARE))
        os.environ.setdefault("FACT_PYTHON_DIR", str(PACKAGE_DIR.parent))


def core():
    """fact._core, with the environment set."""
    configure_environment()
    try:
        from fact import _core
    except ImportError as e:
        raise FactError("FACT's C++ core (the extension module fact._core) is not built: install the package with "
                        "`pip install .` from a FACT checkout (scripts/bootstrap does it for the checkout's .venv)"
                        ) from e
    return _core


def call(function: str, *args, **kwargs):
    """A function of fact._core; its errors as FactError with the core's message."""
    _core = core()
    try:
        return getattr(_core, function)(*args, **kwargs)
    except _core.FactError as e:
        raise FactError(str(e)) from None
