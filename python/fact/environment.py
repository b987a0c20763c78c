"""`python -m fact.environment [--cuda] [--cutlass]`: what this Python offers FACT, as one JSON line.

--cuda: whether torch can use a CUDA GPU ({"cuda": bool, "cuda_reason": why not or null}): the CUDA driver's device
count (libcuda, through ctypes) and whether the installed torch is a CUDA build, without importing torch (seconds
a warm `fact optimize` would otherwise spend before anything needs torch); torch.cuda itself when torch is imported.
--cuda-torch: whether this torch can build the op library ({"cuda_torch": bool, "cuda_torch_reason"}: a CUDA build
of torch, as fact.realize.op_library_build needs); imports torch.
--cutlass: the CUTLASS source root of the installed cutlass_library wheel ({"cutlass_dir": path or null,
"cutlass_error": why not or null}); imports only cutlass_library.

`fact` asks its Python worker (fact.worker) once per process, instead of starting a Python for each question.
Exit status: 0 (the answers, even negative ones, are in the JSON).
"""
from __future__ import annotations

import argparse
import json
import os
import sys


def driver_device_count() -> tuple[int, str | None]:
    """CUDA devices the driver reports (cuInit, cuDeviceGetCount; CUDA_VISIBLE_DEVICES applies), and why none."""
    import ctypes
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0, "no CUDA driver (libcuda.so.1 cannot be loaded)"
    if lib.cuInit(0) != 0:
        return 0, "the CUDA driver did not initialize (cuInit failed)"
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return 0, "the CUDA driver reports no device"
    return count.value, None


def cuda_answer() -> dict:
    if "torch" not in sys.modules:
        import importlib.metadata
        try:
            version = importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            return {"cuda": False, "cuda_reason": "PyTorch is not installed"}
        if version.endswith("+cpu"):
            return {"cuda": False, "cuda_reason": f"torch {version} is a CPU-only build"}
        devices, why = driver_device_count()
        return {"cuda": devices > 0, "cuda_reason": why and f"{why} (torch {version})"}
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - a broken torch is an answer, not a crash
        return {"cuda": False, "cuda_reason": f"PyTorch cannot be imported ({type(e).__name__}: {e})"}
    if not torch.cuda.is_available():
        return {"cuda": False, "cuda_reason": f"torch {torch.__version__} sees no CUDA device"}
    return {"cuda": True, "cuda_reason": None}


def cuda_torch_answer() -> dict:
    from fact.realize.op_library_build import NeedsCudaTorch, torch_build_flags
    try:
        torch_build_flags()
    except NeedsCudaTorch as e:
        return {"cuda_torch": False, "cuda_torch_reason": str(e)}
    return {"cuda_torch": True, "cuda_torch_reason": None}


def cutlass_answer() -> dict:
    try:
        import cutlass_library
    except Exception as e:  # noqa: BLE001
        return {"cutlass_dir": None, "cutlass_error": f"cutlass_library cannot be imported ({type(e).__name__}: {e})"}
    root = os.path.join(os.path.dirname(cutlass_library.__file__), "source")
    if not os.path.exists(os.path.join(root, "include", "cutlass", "cutlass.h")):
        return {"cutlass_dir": None, "cutlass_error": f"{root} has no include/cutlass/cutlass.h"}
    return {"cutlass_dir": root, "cutlass_error": None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fact.environment", description=__doc__.splitlines()[0])
    ap.add_argument("--cuda", action="store_true", help="does torch see a CUDA GPU")
    ap.add_argument("--cuda-torch", action="store_true", help="can this torch build the op library (a CUDA build)")
    ap.add_argument("--cutlass", action="store_true", help="where is the cutlass_library wheel's CUTLASS source")
    args = ap.parse_args(argv)
    answer: dict = {}
    if args.cuda:
        answer.update(cuda_answer())
    if args.cuda_torch:
        answer.update(cuda_torch_answer())
    if args.cutlass:
        answer.update(cutlass_answer())
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
