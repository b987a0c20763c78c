"""Loading an op library (libfact_ops.so) into this process: the C++ runtime first, into the global symbol scope.

Measured on the H100 machine (Ubuntu 24.04, g++ 13.3, nvcc 13.0): the kernel objects nvcc compiles there carry weak
copies of libstdc++'s stream inserters (std::ostream::_M_insert<long> and others), and a library loaded with
RTLD_LOCAL binds its calls to those copies, because Python itself does not link libstdc++ and torch's libraries
load it into their local scope only. Formatting an integer into an op's error message (TORCH_CHECK) then crashed
the process with a segmentation fault instead of raising. With libstdc++ in the global scope the library binds to
it and the error is raised. The composed module (templates/compose/model_new.py.in) does the same on its own."""
from __future__ import annotations

import ctypes
import ctypes.util


def load_op_library(path) -> None:
    """torch.ops.load_library(path), with libstdc++ made global first (see the module's doc)."""
    import torch
    name = ctypes.util.find_library("stdc++")
    if name:
        ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    torch.ops.load_library(str(path))
