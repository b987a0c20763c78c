"""What a kernel family's measurement case gives the measuring worker (measure_worker.py), with the
defaults most families take. A family's case module (named by data/families/<name>.json's "python_case")
defines parse_problem(obj, where) and Case, a subclass of MeasureCase built from the parsed problem.

A case supplies: fresh random inputs laid out as the module's tensors are, with NaN-poisoned, guarded
outputs (make_inputs; inputs.outputs maps each output's name to (view, guarded flat buffer)); the tensors
a kernel must leave unchanged (input_tensors); the kernel's argument struct (kernel_args, of type
args_type); a float64 replay of the matched subgraph (reference); PyTorch's ways of computing the same in
the same numerics (baselines; the fastest is the baseline); the error bound (tolerance); the bytes one
input set moves (bytes_per_set, for rotating sets past L2); extra problems to verify (verify_variants); the
inputs timed (make_timing_inputs, make_inputs' by default); and other layouts timed beside them (timed_variants).
"""
from __future__ import annotations


class MeasureCase:
    family = ""
    args_type = None          # the ctypes struct of kernel_abi.py the kernel's functions take
    has_workspace = False     # whether the kernel exports workspace_bytes and its struct has a workspace

    def __init__(self, problem):
        self.problem = problem

    def pre_kernel(self):
        """fn(inputs) that the composed module runs with PyTorch right before the kernel (its time counts
        toward the kernel's), or None."""
        return None

    def keep_between_calls(self, lib, inputs, args):
        """What the composed module's op keeps between calls for these inputs (a module weight's pre-pass copy),
        made with the kernel library `lib` and attached to args; returns the tensor to hold while args is used,
        or None (the default: nothing is kept)."""
        return None

    def fp32_reference_err(self, inputs, ref) -> float | None:
        """Relative error of PyTorch's fp32 path on these inputs, the accuracy an fp32-accurate mode must
        match (the tuner gates 3xTF32 on it), or None where nothing is gated on it."""
        return None

    def tolerance_table(self) -> dict:
        """How the tolerance is set, for the result's "tolerances"."""
        return {"why": "the family case's bound (see norm_case.py / attention_case.py)"}

    def verify_variants(self) -> list:
        """Extra problems verified before timing (e.g. odd lengths that no tile divides)."""
        return []

    def timed_variants(self) -> list:
        """Problems timed beside this one, kernel and baseline (verified among verify_variants): another layout
        the composed module may hand the kernel. Their times are reported beside the tuned problem's; the
        tuned problem's alone decide the winner."""
        return []

    def make_timing_inputs(self, device):
        """The inputs kernels and baselines are timed on: make_inputs' unless a family's verification inputs
        differ from what models feed it in ways that change a kernel's time (attention masks)."""
        return self.make_inputs(device)
