"""Checks a built op library on the GPU: every torch.ops.fact op on the problems it was tuned for.

    python -m fact.realize.op_check DIR [-o result.json] [--trials 3] [--rep-ms 200]

Per op and tuned problem: output vs a float64 reference on fresh random inputs (gemm_case.py's operands,
reference and tolerance), shape propagation on meta tensors and under FakeTensorMode (the output's sizes, strides
and dtype must equal the real output's), torch.library.opcheck (schema, fake tensor, AOT dispatch),
torch.compile(fullgraph=True) of a function calling the op against eager, b passed as a module weight
(b_constant=True: the op keeps B's pre-pass copy from the second call on, and must make it again after b is
updated in place), and the op's time against torch.matmul in the same numerics (timing.py, as the tuner times;
with b_constant as the tuned problem had it). Prints a table; writes the result JSON.
GEMM ops only: normalization and attention ops are listed as not checked here (the tuner verified them, and
`fact optimize`'s end-to-end check runs them in the composed module).

Exit status: 0 every check passed; 1 some check failed; 2 bad input (manifest, library not built);
3 no CUDA GPU here.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import timing, verify
from .gemm_case import GemmCase, GemmProblem, Operands, parse_problem, torch_epilogue_gemm
from .measure_request import RequestError
from .measure_worker import context_usable, environment, first_line, set_matmul_precision
from .op_library_build import ManifestError, OpLibrary, OpSpec, load_manifest
from .op_library_load import load_op_library
from fact.gpu_lock import holds_gpu

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_NO_GPU = 0, 1, 2, 3
# opcheck's autograd test needs inputs that require grad; these ops are forward-only.
OPCHECK_TESTS = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")


def problem_of(tuned: dict, where: str) -> GemmProblem:
    """The measurement runner's GemmProblem from the C++ GemmProblem JSON of a tune report row."""
    p = tuned.get("problem")
    if not isinstance(p, dict):
        raise RequestError(f"{where}.problem: missing")
    layout = lambda op: {"row": "row", "column": "col"}.get((p.get(op) or {}).get("layout"), "?")  # noqa: E731
    try:
        return parse_problem({"m": p.get("m"), "n": p.get("n"), "k": p.get("k"), "batch": p.get("batch", 1),
                              "layout_a": layout("a"), "layout_b": layout("b"), "dtype": p.get("element_in"),
                              "numerics": p.get("numerics"), "epilogue": p.get("epilogue", "none"),
                              "b_constant": bool((p.get("b") or {}).get("constant", False))}, where)
    except ValueError as e:  # problem_fields.ProblemError
        raise RequestError(f"{e} (from the tune report's problem JSON)") from e


def describe(p: GemmProblem) -> str:
    batch = f" b{p.batch}" if p.batch > 1 else ""
    return f"{p.m}x{p.n}x{p.k}{batch} {p.layout_a[0]}{p.layout_b[0]} {p.numerics} {p.epilogue}"


def op_args(p: GemmProblem, ops: Operands) -> tuple:
    """(a, b, bias, residual) as a model would pass them: 2-D when unbatched, in the kernel's layouts."""
    if p.batch == 1:
        return ops.a[0], ops.b[0], ops.bias, ops.residual[0] if ops.residual is not None else None
    return ops.a, ops.b, ops.bias, ops.residual


def as_batched(out):
    return out.unsqueeze(0) if out.dim() == 2 else out


class OpChecker:
    def __init__(self, lib: OpLibrary, trials: int, warmup_ms: float, rep_ms: float):
        import torch
        self.torch = torch
        self.lib = lib
        self.trials, self.warmup_ms, self.rep_ms = trials, warmup_ms, rep_ms
        self.device = torch.device("cuda", 0)
        self.env = environment()

    def check(self, spec: OpSpec, tuned: dict, where: str) -> dict:
        torch = self.torch
        fn = getattr(torch.ops.fact, spec.name)
        row = {"op": f"fact::{spec.name}", "config_id": spec.config_id, "summary": spec.summary,
               "pattern": tuned.get("pattern"), "problem": None, "status": "ok", "failures": [],
               "tuned_fact_ms": tuned.get("fact_ms"), "tuned_baseline_ms": tuned.get("baseline_ms")}

        def fail(check: str, message: str) -> None:
            row["failures"].append(f"{check}: {message}")

        try:
            p = problem_of(tuned, where)
        except RequestError as e:
            row.update(status="failed", failures=[f"problem: {e}"])
            return row
        row["problem"] = describe(p)
        set_matmul_precision(p.numerics)
        case = GemmCase(p)
        prepare = case.pre_kernel() or (lambda ops: None)  # SwiGLU: U by PyTorch, as the composed module does
        tol = case.tolerance()
        row["tolerance"] = tol

        # 1. Output against the float64 reference, fresh inputs per trial.
        real = None
        try:
            worst = None
            for trial in range(self.trials):
                ops = case.make_inputs(self.device)
                prepare(ops)
                ref = case.reference(ops)["d"]
                snapshot = verify.snapshot(case.input_tensors(ops))
                real = fn(*op_args(p, ops))
                torch.cuda.synchronize()
                c = verify.compare(as_batched(real), ref, tol)
                if not c.passed:
                    fail("verify", f"trial {trial}: {c.message}")
                    break
                if not verify.unchanged(case.input_tensors(ops), snapshot):
                    fail("verify", f"trial {trial}: the op modified its inputs")
                    break
                if worst is None or c.rel_err > worst.rel_err:
                    worst = c
            if worst is not None:
                row.update(rel_err=worst.rel_err, max_abs_err=worst.max_abs_err, max_err_vs_peak=worst.max_err_vs_peak)
        except Exception as e:  # noqa: BLE001 - a TORCH_CHECK or CUDA error is the finding
            fail("verify", first_line(e))
            if not context_usable():
                row.update(status="crashed")
                return row
        if real is None:
            row["status"] = "failed"
            return row

        # 1b. b as a module weight: calls 2 and 3 read the kept copy of B; b.mul_ bumps its version counter, so
        # call 4 copies B afresh and call 5 keeps the new copy.
        try:
            ops = case.make_inputs(self.device)
            prepare(ops)
            steps = ("first call", "second call", "third call", "after an in-place update of b", "fifth call")
            for step in steps:
                if step.startswith("after"):
                    ops.b_storage.mul_(-0.5)
                ref = case.reference(ops)["d"]
                got = fn(*op_args(p, ops), b_constant=True)
                torch.cuda.synchronize()
                c = verify.compare(as_batched(got), ref, tol)
                if not c.passed:
                    fail("kept_b", f"{step}: {c.message}")
                    break
            row["kept_b"] = not any(f.startswith("kept_b") for f in row["failures"])
        except Exception as e:  # noqa: BLE001
            row["kept_b"] = False
            fail("kept_b", first_line(e))
            if not context_usable():
                row.update(status="crashed")
                return row
        arg_ops = case.make_inputs(self.device)
        prepare(arg_ops)  # SwiGLU's U must be real numbers for opcheck and compile
        args = op_args(p, arg_ops)
        expect = (tuple(real.shape), tuple(real.stride()), real.dtype)

        # 2. Shape propagation: Meta kernel and FakeTensorMode.
        try:
            meta = fn(*[a.to("meta") if a is not None else None for a in args])
            got = (tuple(meta.shape), tuple(meta.stride()), meta.dtype)
            row["meta"] = got == expect
            if got != expect:
                fail("meta", f"meta output {got} but the real output is {expect}")
        except Exception as e:  # noqa: BLE001
            row["meta"] = False
            fail("meta", first_line(e))
        try:
            from torch._subclasses.fake_tensor import FakeTensorMode
            with FakeTensorMode() as mode:
                fake = fn(*[mode.from_tensor(a) if a is not None else None for a in args])
                got = (tuple(fake.shape), tuple(fake.stride()), fake.dtype)
            row["fake"] = got == expect
            if got != expect:
                fail("fake", f"fake output {got} but the real output is {expect}")
        except Exception as e:  # noqa: BLE001
            row["fake"] = False
            fail("fake", first_line(e))

        # 3. torch.library.opcheck.
        try:
            results = torch.library.opcheck(fn.default, args, test_utils=OPCHECK_TESTS, raise_exception=False)
            row["opcheck"] = {k: ("SUCCESS" if v == "SUCCESS" else first_line(v) if isinstance(v, BaseException)
                                  else str(v)) for k, v in results.items()}
            for k, v in row["opcheck"].items():
                if v != "SUCCESS":
                    fail(f"opcheck.{k}", v)
        except Exception as e:  # noqa: BLE001
            row["opcheck"] = {"error": first_line(e)}
            fail("opcheck", first_line(e))

        # 4. torch.compile(fullgraph=True) of a caller; doubling is exact, so results must be equal.
        try:
            def caller(a, b, bias, residual):
                return fn(a, b, bias, residual) * 2

            compiled = torch.compile(caller, fullgraph=True)
            got, want = compiled(*args), caller(*args)
            torch.cuda.synchronize()
            row["compile"] = bool(torch.equal(got, want))
            if not row["compile"]:
                diff = float((got.double() - want.double()).abs().max())
                fail("compile", f"compiled result differs from eager (max |diff| {diff:.3g})")
        except Exception as e:  # noqa: BLE001
            row["compile"] = False
            fail("compile", first_line(e))
        if not context_usable():
            row["status"] = "crashed"
            return row

        # 5. Time: the op vs torch.matmul (+ PyTorch's epilogue ops) in the same numerics, same inputs.
        try:
            n_sets = timing.rotation_count(case.bytes_per_set(), self.env["l2_bytes"])
            sets = [case.make_inputs(self.device) for _ in range(n_sets)]
            call_args = [op_args(p, s) for s in sets]
            # SwiGLU: the op's time includes the up projection that computes its U, as in the composed module.
            def fact_call(i):
                prepare(sets[i])
                return fn(*call_args[i], b_constant=p.b_constant)

            fact_t = timing.time_launches(fact_call, n_sets, self.warmup_ms, self.rep_ms)
            torch_t = timing.time_launches(lambda i: torch_epilogue_gemm(p, sets[i]), n_sets, self.warmup_ms,
                                           self.rep_ms)
            row.update(fact_ms=fact_t.ms, torch_ms=torch_t.ms, speedup=torch_t.ms / fact_t.ms,
                       timing={"fact": fact_t.to_json(), "torch": torch_t.to_json(), "rotating_sets": n_sets})
        except Exception as e:  # noqa: BLE001
            fail("timing", first_line(e))
        if row["failures"]:
            row["status"] = "failed"
        return row


def ms(v) -> str:
    return f"{v:.4f}" if isinstance(v, (int, float)) else "-"


def mark(v) -> str:
    return "-" if v is None else ("ok" if v else "FAIL")


def print_table(rows: list[dict]) -> None:
    print(f"{'op':<20} {'problem':<28} {'rel err':>9} {'meta':>4} {'fake':>4} {'opcheck':>7} {'compile':>7} {'kept b':>6} "
          f"{'fact ms':>9} {'torch ms':>9} {'speedup':>7} {'tuned ms':>9}  status")
    for r in rows:
        oc = r.get("opcheck")
        oc_mark = "-" if oc is None else ("ok" if all(v == "SUCCESS" for v in oc.values()) else "FAIL")
        rel = f"{r['rel_err']:.2e}" if isinstance(r.get("rel_err"), float) else "-"
        sp = f"{r['speedup']:.2f}x" if isinstance(r.get("speedup"), float) else "-"
        print(f"{r['op'][len('fact::'):][:20]:<20} {str(r.get('problem'))[:28]:<28} {rel:>9} {mark(r.get('meta')):>4} "
              f"{mark(r.get('fake')):>4} {oc_mark:>7} {mark(r.get('compile')):>7} {mark(r.get('kept_b')):>6} "
              f"{ms(r.get('fact_ms')):>9} "
              f"{ms(r.get('torch_ms')):>9} {sp:>7} {ms(r.get('tuned_fact_ms')):>9}  {r['status']}")
    for r in rows:
        for f in r["failures"]:
            print(f"  {r['op']}: {f}")


def write_result(path: str | None, result: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(result, indent=1) + "\n")


@holds_gpu
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fact.realize.op_check", description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="op library folder, built by python -m fact.realize.op_library_build")
    ap.add_argument("-o", "--output", help="write the result JSON here")
    ap.add_argument("--trials", type=int, default=3, help="fresh input sets checked against the reference")
    ap.add_argument("--warmup-ms", type=float, default=25.0)
    ap.add_argument("--rep-ms", type=float, default=200.0)
    args = ap.parse_args(argv)
    try:
        lib = load_manifest(args.dir)
    except ManifestError as e:
        print(f"op_check: {e}", file=sys.stderr)
        write_result(args.output, {"status": "bad_input", "message": str(e)})
        return EXIT_BAD_INPUT
    try:
        import torch
        gpu = torch.cuda.is_available()
        why = "torch.cuda.is_available() is False"
    except ImportError as e:
        gpu, why = False, f"torch cannot be imported ({e})"
    if not gpu:
        msg = f"op_check needs a CUDA GPU ({why}); run it on the GPU machine"
        print(f"op_check: {msg}", file=sys.stderr)
        write_result(args.output, {"status": "needs_gpu", "message": msg, "library": str(lib.library_path)})
        return EXIT_NO_GPU
    if not lib.library_path.is_file():
        msg = f"{lib.library_path}: not built; run `python -m fact.realize.op_library_build {lib.dir}` first"
        print(f"op_check: {msg}", file=sys.stderr)
        write_result(args.output, {"status": "bad_input", "message": msg})
        return EXIT_BAD_INPUT
    load_op_library(lib.library_path)
    checker = OpChecker(lib, args.trials, args.warmup_ms, args.rep_ms)
    rows = []
    for i, spec in enumerate(lib.ops):
        if spec.family != "gemm":
            print(f"op_check: fact::{spec.name} ({spec.family}) not checked: this check knows GEMM problems only")
            continue
        for j, tuned in enumerate(spec.tuned_for):
            if rows and rows[-1]["status"] == "crashed":
                rows.append({"op": f"fact::{spec.name}", "config_id": spec.config_id, "status": "skipped",
                             "failures": ["skipped: an earlier op left the CUDA context unusable"]})
                continue
            rows.append(checker.check(spec, tuned, f"manifest.ops[{i}].tuned_for[{j}]"))
    ok = all(r["status"] == "ok" for r in rows)
    result = {"status": "ok" if ok else "failed", "library": str(lib.library_path), "environment": checker.env,
              "torch": torch.__version__, "opcheck_tests": list(OPCHECK_TESTS), "rows": rows}
    write_result(args.output, result)
    print_table(rows)
    return EXIT_OK if ok else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
