"""ctypes mirror of src/realize/kernel_abi.h: the argument structs (FactGemmArgs, FactNormArgs,
FactAttentionArgs, FactRopeArgs) and the functions every candidate exports.

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


class FactNormArgs(ctypes.Structure):
    _fields_ = [
        ("rows", ctypes.c_int64), ("cols", ctypes.c_int64),
        ("x", ctypes.c_void_p), ("x_row_stride", ctypes.c_int64),
        ("residual", ctypes.c_void_p), ("residual_row_stride", ctypes.c_int64),
        ("weight", ctypes.c_void_p),
        ("bias", ctypes.c_void_p),
        ("y", ctypes.c_void_p), ("y_row_stride", ctypes.c_int64),
        ("sum", ctypes.c_void_p), ("sum_row_stride", ctypes.c_int64),
        ("eps", ctypes.c_float),
        ("stream", ctypes.c_void_p),
    ]


class FactAttentionArgs(ctypes.Structure):
    _fields_ = [
        ("batch", ctypes.c_int64), ("heads", ctypes.c_int64), ("heads_kv", ctypes.c_int64),
        ("seq_q", ctypes.c_int64), ("seq_k", ctypes.c_int64), ("head_dim", ctypes.c_int64),
        ("q", ctypes.c_void_p), ("q_batch_stride", ctypes.c_int64), ("q_head_stride", ctypes.c_int64),
        ("q_row_stride", ctypes.c_int64),
        ("k", ctypes.c_void_p), ("k_batch_stride", ctypes.c_int64), ("k_head_stride", ctypes.c_int64),
        ("k_row_stride", ctypes.c_int64),
        ("v", ctypes.c_void_p), ("v_batch_stride", ctypes.c_int64), ("v_head_stride", ctypes.c_int64),
        ("v_row_stride", ctypes.c_int64),
        ("o", ctypes.c_void_p), ("o_batch_stride", ctypes.c_int64), ("o_head_stride", ctypes.c_int64),
        ("o_row_stride", ctypes.c_int64),
        ("scale", ctypes.c_float),
        ("causal", ctypes.c_int),
        ("stream", ctypes.c_void_p),
    ]


class FactRopeArgs(ctypes.Structure):
    _fields_ = [
        ("batch", ctypes.c_int64), ("heads", ctypes.c_int64), ("seq", ctypes.c_int64), ("head_dim", ctypes.c_int64),
        ("x", ctypes.c_void_p), ("x_batch_stride", ctypes.c_int64), ("x_head_stride", ctypes.c_int64),
        ("x_row_stride", ctypes.c_int64),
        ("cos", ctypes.c_void_p), ("cos_batch_stride", ctypes.c_int64), ("cos_head_stride", ctypes.c_int64),
        ("cos_row_stride", ctypes.c_int64),
        ("sin", ctypes.c_void_p), ("sin_batch_stride", ctypes.c_int64), ("sin_head_stride", ctypes.c_int64),
        ("sin_row_stride", ctypes.c_int64),
        ("out", ctypes.c_void_p), ("out_batch_stride", ctypes.c_int64), ("out_head_stride", ctypes.c_int64),
        ("out_row_stride", ctypes.c_int64),
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
    """One candidate: a shared library exporting fact_<id>_{can_implement,workspace_bytes,run,describe}.

    args_type is the family's argument struct; families without a workspace (normalization, attention, rope)
    export no workspace_bytes, and workspace_bytes() then returns 0."""

    def __init__(self, path: str | Path, kernel_id: str, args_type=FactGemmArgs, has_workspace: bool = True):
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
        args_p = ctypes.POINTER(args_type)
        self._can_implement = self._symbol("can_implement", ctypes.c_int, [args_p])
        self._workspace_bytes = self._symbol("workspace_bytes", ctypes.c_size_t, [args_p]) if has_workspace else None
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

    def can_implement(self, args) -> int:
        return int(self._can_implement(ctypes.byref(args)))

    def workspace_bytes(self, args) -> int:
        return int(self._workspace_bytes(ctypes.byref(args))) if self._workspace_bytes else 0

    def run(self, args) -> int:
        return int(self._run(ctypes.byref(args)))

    def run_fn(self):
        """The raw ctypes function, for timing loops that pass prebuilt byref() arguments."""
        return self._run

    def describe(self) -> str:
        text = self._describe()
        return text.decode("utf-8", errors="replace") if text else ""
