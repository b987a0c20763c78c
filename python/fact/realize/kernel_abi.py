"""ctypes mirror of src/realize/kernel_abi.h: FactGemmArgs and the four functions every candidate exports.

Keep in sync with the header; tests/python/test_measure.py compiles the header with gcc and compares
sizeof/offsetof of every field with this mirror.
"""
from __future__ import annotations

import ctypes
import re
from pathlib import Path

FACT_KERNEL_ABI_VERSION = 1

# enum FactStatus
FACT_OK = 0
FACT_ERR_SHAPE = 1
FACT_ERR_WORKSPACE = 2
FACT_ERR_INIT = 3
FACT_ERR_LAUNCH = 4
FACT_ERR_UNSUPPORTED = 5

STATUS_NAMES = {
    FACT_OK: "FACT_OK",
    FACT_ERR_SHAPE: "FACT_ERR_SHAPE (the kernel cannot take this shape/alignment)",
    FACT_ERR_WORKSPACE: "FACT_ERR_WORKSPACE (workspace missing or too small)",
    FACT_ERR_INIT: "FACT_ERR_INIT (CUTLASS initialize() failed)",
    FACT_ERR_LAUNCH: "FACT_ERR_LAUNCH (the launch failed)",
    FACT_ERR_UNSUPPORTED: "FACT_ERR_UNSUPPORTED (device or arch not supported)",
}

# A kernel id becomes part of C symbol names (fact_<id>_run), so it must be a C identifier fragment.
KERNEL_ID_PATTERN = re.compile(r"^[A-Za-z0-9_]+$")


def status_name(code: int) -> str:
    return STATUS_NAMES.get(code, f"unknown status {code}")


class FactGemmArgs(ctypes.Structure):
    _fields_ = [
        ("m", ctypes.c_int64), ("n", ctypes.c_int64), ("k", ctypes.c_int64), ("batch", ctypes.c_int64),
        ("a", ctypes.c_void_p), ("lda", ctypes.c_int64), ("batch_stride_a", ctypes.c_int64),
        ("b", ctypes.c_void_p), ("ldb", ctypes.c_int64), ("batch_stride_b", ctypes.c_int64),
        ("c", ctypes.c_void_p), ("ldc", ctypes.c_int64), ("batch_stride_c", ctypes.c_int64),
        ("d", ctypes.c_void_p), ("ldd", ctypes.c_int64), ("batch_stride_d", ctypes.c_int64),
        ("bias", ctypes.c_void_p),
        ("residual", ctypes.c_void_p),
        ("alpha", ctypes.c_float), ("beta", ctypes.c_float),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("stream", ctypes.c_void_p),
    ]


FACT_ROWWISE_MAX_INPUTS = 4


class FactRowwiseArgs(ctypes.Structure):
    """Arguments of a generated row-wise chain kernel: fact_<id>_run(const FactRowwiseArgs*)."""
    _fields_ = [
        ("rows", ctypes.c_int64), ("cols", ctypes.c_int64),
        ("num_inputs", ctypes.c_int32),
        ("inputs", ctypes.c_void_p * FACT_ROWWISE_MAX_INPUTS),
        ("input_row_stride", ctypes.c_int64 * FACT_ROWWISE_MAX_INPUTS),
        ("output", ctypes.c_void_p), ("output_row_stride", ctypes.c_int64),
        ("stream", ctypes.c_void_p),
    ]


class KernelLoadError(Exception):
    """The library could not be opened or lacks one of the four exported functions."""


class KernelLibrary:
    """One candidate: a shared library exporting fact_<id>_{can_implement,workspace_bytes,run,describe}."""

    def __init__(self, path: str | Path, kernel_id: str):
        if not KERNEL_ID_PATTERN.match(kernel_id):
            raise KernelLoadError(f"kernel id {kernel_id!r} is not a C identifier fragment ([A-Za-z0-9_]+)")
        self.path = Path(path)
        self.kernel_id = kernel_id
        if not self.path.is_file():
            raise KernelLoadError(f"{self.path}: no such file (was the candidate built?)")
        try:
            # RTLD_LOCAL: candidates built from the same template export the same helper symbols.
            self._lib = ctypes.CDLL(str(self.path), mode=ctypes.RTLD_LOCAL)
        except OSError as e:
            raise KernelLoadError(f"{self.path}: dlopen failed: {e}") from e
        args_p = ctypes.POINTER(FactGemmArgs)
        self._can_implement = self._symbol("can_implement", ctypes.c_int, [args_p])
        self._workspace_bytes = self._symbol("workspace_bytes", ctypes.c_size_t, [args_p])
        self._run = self._symbol("run", ctypes.c_int, [args_p])
        self._describe = self._symbol("describe", ctypes.c_char_p, [])

    def _symbol(self, suffix: str, restype, argtypes):
        name = f"fact_{self.kernel_id}_{suffix}"
        try:
            fn = getattr(self._lib, name)
        except AttributeError as e:
            raise KernelLoadError(
                f"{self.path}: does not export {name} (the id in the request must match the kernel's config id)"
            ) from e
        fn.restype = restype
        fn.argtypes = argtypes
        return fn

    def can_implement(self, args: FactGemmArgs) -> int:
        return int(self._can_implement(ctypes.byref(args)))

    def workspace_bytes(self, args: FactGemmArgs) -> int:
        return int(self._workspace_bytes(ctypes.byref(args)))

    def run(self, args: FactGemmArgs) -> int:
        return int(self._run(ctypes.byref(args)))

    def run_fn(self):
        """The raw ctypes function, for timing loops that pass prebuilt byref() arguments."""
        return self._run

    def describe(self) -> str:
        text = self._describe()
        return text.decode("utf-8", errors="replace") if text else ""
