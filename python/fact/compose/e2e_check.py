"""End-to-end check of a composed module (`fact compose` output) against the user's Model, and the benchmark.

Correctness: KernelBench's rule (fresh random inputs each trial, atol = rtol = 1e-2, composed vs original in
the same numerics) plus the relative error of each module against a float64 run of the original. A trial that
fails KernelBench's rule still passes when the composed module is as close to float64 as the original, within
FLOAT64_MARGIN on both the relative 2-norm error and the largest absolute error (each trial's "correct_by" says
which rule passed it): deep networks in TF32, PyTorch's default for cuDNN convolutions, need it (after ResNet-50's
53 TF32 layers two TF32 runs differ by 0.02 in their largest logits though each is within 1e-3 of float64).
Timing (CUDA GPU only): eager (the original Model), the composed module, torch.compile (default),
torch.compile (mode="reduce-overhead": its CUDA graphs, the counterpart of a graphed composed module) and
torch.compile (mode="max-autotune") of the original, all in this one process under one numerics setting,
timed in interleaved rounds (interleaved_ms: every variant once per round, in rotated order, so clock drift
favours none). Compile time (the first call) is recorded, not timed. A variant that fails (e.g. a compile error) is reported with its error.
The composed module is timed twice, op by op and replayed as one CUDA graph a call (choose_replay): the graph is
chosen where it matched and was clearly faster (host-bound modules of many small ops), written to the folder's
replay.json (the module's default), and its time is the composed module's.

Numerics: fp32 and 3xtf32 run under torch.set_float32_matmul_precision("highest"), tf32 under "high".
bf16 and fp16 cast the model and its inputs to that dtype (what a user of that dtype runs); every variant,
baselines included, runs the same cast model. The float64 reference is the original fp32 weights and the
same (fp32-drawn) inputs in float64, so quantizing to bf16 counts as error, for every variant alike.

Before anything else, every op the manifest accepts must be in torch.ops.fact once the library (--lib) or
the reference ops (--reference) are loaded; otherwise the result lists them in "missing_ops" and the exit
status is 4, so `fact optimize` can compose again without them.

Usage: python -m fact.compose.e2e_check COMPOSED_DIR [--lib libfact_ops.so | --reference]
           [--numerics tf32] [--trials 5] [--iters 20] [--no-compile] [--no-max-autotune] [--profile kernels.json]
           [-o result.json]
Exit status: 0 correct; 1 composed output differs from the original; 2 bad usage; 4 ops missing.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

from fact.compose.kernel_profile import profile_variants, summary_lines, write_profile
from fact.gpu_lock import holds_gpu
from fact.realize.op_library_load import load_op_library

PRECISION = {"fp32": "highest", "3xtf32": "highest", "tf32": "high", "bf16": "highest", "fp16": "highest"}
DTYPE = {"fp32": torch.float32, "3xtf32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
         "fp16": torch.float16}
ATOL = RTOL = 1e-2  # KernelBench's tolerance
FLOAT64_MARGIN = 2.0  # how many times the original's float64 error the composed module's may be, where the two differ
GRAPH_WIN = 0.97  # the graphed replay is chosen when it takes at most this share of the op-by-op replay's time
# A graphed call copies its inputs into the graph's own: past this many bytes of inputs the copy outweighs any launch
# saving (KernelBench's level-1 inputs are GBs), so neither FACT's graph nor torch.compile's reduce-overhead is tried
# (the copies of several such inputs at once could also exhaust the GPU's memory and fail every variant's timing).
GRAPH_MAX_INPUT_BYTES = 1 << 30
VARIANTS = ("eager", "composed", "compile_default", "compile_reduce_overhead", "compile_max_autotune")
EXIT_OK, EXIT_INCORRECT, EXIT_USAGE, EXIT_OPS_MISSING = 0, 1, 2, 4


def load_composed(folder: Path):
    spec = importlib.util.spec_from_file_location("fact_composed_model", folder / "model_new.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def missing_ops(manifest: dict) -> list[str]:
    """The accepted ops of a composed-module manifest that torch.ops.fact does not hold."""
    missing = []
    for entry in manifest.get("accepted", []):
        try:
            getattr(torch.ops.fact, entry["op"])
        except (AttributeError, RuntimeError):
            missing.append(entry["op"])
    return missing


PLAIN_VALUES = (int, float, bool, str, type(None))
REL_ERR_CHUNK = 1 << 26  # elements per slice of the error sums (512 MB in float64)


def leaves(out) -> list:
    """A module's result flattened: a tensor, tuples, dicts, dataclasses and Hugging Face ModelOutputs alike."""
    flat, _ = torch.utils._pytree.tree_flatten(out)
    return flat


def rel_err(out, ref) -> float | None:
    """The largest relative error (2-norm) over the floating tensors of a result, against the float64 one (None
    without one)."""
    errors = float64_errors(out, ref)
    return errors[0] if errors else None


def float64_errors(out, ref) -> tuple[float, float] | None:
    """(largest relative 2-norm error, largest absolute error) over the floating tensors of a result, against the
    float64 one (None without one)."""
    if ref is None:
        return None
    worst = None
    for x, r in zip(leaves(out), leaves(ref)):
        if isinstance(x, torch.Tensor) and x.is_floating_point() and r.numel():
            if x.shape != r.shape:  # compare() already failed the result; no error to measure
                return None
            # Over slices of the flattened tensors: a float64 copy of a multi-GB output would not fit beside it.
            xf, rf = x.reshape(-1), r.reshape(-1)
            diff2 = norm2 = largest = 0.0
            for i in range(0, rf.numel(), REL_ERR_CHUNK):
                rc = rf[i:i + REL_ERR_CHUNK].double()
                d = xf[i:i + REL_ERR_CHUNK].double() - rc
                diff2 += float(d.square().sum())
                norm2 += float(rc.square().sum())
                largest = max(largest, float(d.abs().max()))
            err = math.sqrt(diff2 / norm2) if norm2 > 0 else math.sqrt(diff2)
            worst = (err, largest) if worst is None else (max(worst[0], err), max(worst[1], largest))
    return worst


def as_accurate(composed: tuple[float, float] | None, original: tuple[float, float] | None) -> bool:
    """Whether the composed module's float64 errors (rel, max abs) are within FLOAT64_MARGIN of the original's (a
    floor of 1e-6 on each, where the original is exact), NaN-free."""
    if composed is None or original is None or any(math.isnan(v) for v in composed + original):
        return False
    return (composed[0] <= FLOAT64_MARGIN * max(original[0], 1e-6) and
            composed[1] <= FLOAT64_MARGIN * max(original[1], 1e-6))


def compare(out, expected) -> tuple[bool, float | None, bool]:
    """KernelBench's check over every leaf of two results: (all close, largest |difference|, None where the
    structures or shapes differ; whether the non-floating leaves, which must be equal, are). The third value lets the
    float64 rule judge the floating leaves alone."""
    got, want = leaves(out), leaves(expected)
    if len(got) != len(want):
        return False, None, False
    close, worst, exact = True, 0.0, True
    for x, y in zip(got, want):
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            # Plain values must be equal; an object PyTorch cannot flatten (a cache) must at least be of one type.
            same = x == y if isinstance(x, PLAIN_VALUES) else type(x) is type(y)
            close = close and same
            exact = exact and not isinstance(x, torch.Tensor) and not isinstance(y, torch.Tensor) and bool(same)
            continue
        if x.shape != y.shape:
            return False, None, False
        if x.is_floating_point() or y.is_floating_point():
            close = close and bool(torch.allclose(x, y, atol=ATOL, rtol=RTOL))
            if x.numel():
                worst = max(worst, float((x.float() - y.float()).abs().max()))
        else:
            same = bool(torch.equal(x, y))
            close, exact = close and same, exact and same
    return close, worst, exact


def cast_inputs(inputs, dtype, device):
    return [x.to(device=device, dtype=dtype) if isinstance(x, torch.Tensor) and x.is_floating_point()
            else (x.to(device) if isinstance(x, torch.Tensor) else x) for x in inputs]


def cuda_batch_ms(fn, inputs, calls: int) -> float:
    """Milliseconds per call of `calls` back-to-back calls between one CUDA-event pair."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn(*inputs)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def interleaved_ms(fns: dict, inputs, rounds: int, batch_ms=cuda_batch_ms, target_batch_ms: float = 2.0) -> dict:
    """Median ms per call of each variant, timed in rounds that visit every variant once, each round in a
    rotated order. Timing one variant after another lets GPU clock and thermal drift, and what ran just
    before, favour whichever went first (identical modules measured 0.87-0.98x apart on the H100); rounds
    spread that drift over all variants alike. A batch is as many back-to-back calls as fill target_batch_ms
    (estimated from a warm-up), so short modules are not timed by a single launch's host overhead."""
    names = list(fns)
    calls = {}
    for name in names:
        for _ in range(3):
            fns[name](*inputs)
        estimate = batch_ms(fns[name], inputs, 1)
        calls[name] = max(1, min(100, int(target_batch_ms / max(estimate, 1e-3))))
    samples = {name: [] for name in names}
    for r in range(rounds):
        for i in range(len(names)):
            name = names[(r + i) % len(names)]
            samples[name].append(batch_ms(fns[name], inputs, calls[name]))
    return {name: statistics.median(samples[name]) for name in names}


def choose_replay(op_by_op_ms: float | None, graph_ms: float | None, graph_error: str | None) -> dict:
    """How the delivered module replays: one CUDA graph where that ran, matched the op-by-op replay and measured
    faster by a clear margin (many small ops: the host's launches were the time), else op by op."""
    out = {"op_by_op_ms": op_by_op_ms, "cuda_graph_ms": graph_ms}
    if graph_error:
        return {**out, "chosen": "op_by_op", "why": f"op by op (a CUDA graph not used: {graph_error})"}
    if op_by_op_ms is None or graph_ms is None:
        return {**out, "chosen": "op_by_op", "why": "op by op (a CUDA graph not timed)"}
    if graph_ms <= GRAPH_WIN * op_by_op_ms:
        return {**out, "chosen": "cuda_graph",
                "why": f"one CUDA graph a call ({graph_ms:.4g} ms vs {op_by_op_ms:.4g} ms op by op)"}
    return {**out, "chosen": "op_by_op",
            "why": f"op by op (a CUDA graph gained too little: {graph_ms:.4g} ms vs {op_by_op_ms:.4g} ms)"}


def write_replay_choice(folder: Path, choice: dict) -> None:
    """replay.json beside model_new.py: the composed module reads it for its default (FACT_CUDA_GRAPHS overrides)."""
    target = folder / "replay.json"
    if choice["chosen"] == "cuda_graph":
        target.write_text(json.dumps({"cuda_graphs": True, **choice}, indent=1) + "\n")
    elif target.exists():
        target.unlink()


def compiled(make_original, mode: str | None, backend: str):
    """torch.compile of a fresh original; the dynamo cache is reset so each mode compiles afresh."""
    torch._dynamo.reset()
    kwargs = {"backend": backend}
    if mode:
        kwargs["mode"] = mode
    return torch.compile(make_original(), **kwargs)


def run_variant(name, make, inputs, ref, cuda: bool) -> tuple[dict, object]:
    """Builds a variant and runs it once (timed by the wall clock: for torch.compile that is the compile).
    Returns its entry and the callable for timing, or None where it failed (status "failed" with why)."""
    entry = {"status": "ok"}
    try:
        fn = make()
        t0 = time.perf_counter()
        out = fn(*inputs)
        if cuda:
            torch.cuda.synchronize()
        entry["first_call_s"] = time.perf_counter() - t0
        entry["rel_err"] = rel_err(out, ref)
        del out
    except Exception as e:  # noqa: BLE001 - a failing baseline is reported, never dropped
        entry = {"status": "failed", "error": f"{type(e).__name__}: {e}"[:2000],
                 "traceback_tail": traceback.format_exc()[-1500:]}
        fn = None
    print(f"e2e_check: {name}: {entry.get('status')}", file=sys.stderr)
    return entry, fn


def graphed_calls(composed):
    """The composed module called with its CUDA-graph replay on: the same instance (no second copy of the weights), its
    graph kept between calls (in composed._fact_graphed), the op-by-op replay restored after each call."""
    def call(*inputs):
        composed.fact_cuda_graphs = True
        try:
            return composed(*inputs)
        finally:
            composed.fact_cuda_graphs = False
    return call


def graph_mismatch(composed, inputs) -> str | None:
    """Why the graphed replay may not stand in for the op-by-op one, or None: it captured (after the timing's warm-up
    calls) and a replayed call gives the op-by-op result (KernelBench's rule between the two)."""
    try:
        out_g = graphed_calls(composed)(*inputs)
        state = composed.__dict__.get("_fact_graphed")
        if state is None or state.graph is None:
            return "no graph was captured" + (f" ({state.failed})" if state is not None and state.failed else "")
        close, max_diff, _ = compare(out_g, composed(*inputs))
        return None if close else f"its result differs from the op-by-op replay's (max abs diff {max_diff})"
    except Exception as e:  # noqa: BLE001 - the op-by-op replay stays, said why
        return f"{type(e).__name__}: {e}"[:300]


def main(argv: list[str] | None = None) -> int:
    """Every outcome, a crash of this check included, is a result file: the gate and the suite read it."""
    cudnn_tf32 = torch.backends.cudnn.allow_tf32  # check() sets it for its variants; fact's worker process lives on
    try:
        return check(argv)
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - written as a failed result, never a bare traceback
        args, _ = argument_parser().parse_known_args(argv)
        result = {"status": "failed", "correct": False, "error": f"the end-to-end check raised {type(e).__name__}: {e}"[:2000],
                  "traceback_tail": traceback.format_exc()[-1500:]}
        if args.output:
            Path(args.output).write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps(result, indent=1))
        return EXIT_INCORRECT
    finally:
        torch.backends.cudnn.allow_tf32 = cudnn_tf32


def argument_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m fact.compose.e2e_check")
    ap.add_argument("composed", type=Path)
    ap.add_argument("--lib", help="op library to load (GPU)")
    ap.add_argument("--reference", action="store_true", help="use FACT's CPU reference ops instead of a library")
    ap.add_argument("--numerics", default="tf32", choices=sorted(PRECISION))
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20, help="timing rounds (each times every variant once)")
    ap.add_argument("--no-cudnn-tf32", action="store_true",
                    help="run PyTorch's convolutions with cuDNN's TF32 off (fp32-accurate), as FACT's 3xtf32 ones")
    ap.add_argument("--no-compile", action="store_true", help="skip both torch.compile baselines")
    ap.add_argument("--no-max-autotune", action="store_true", help="skip torch.compile(mode='max-autotune') (slow)")
    ap.add_argument("--compile-backend", default="inductor", help="torch.compile backend of the baselines")
    ap.add_argument("--profile", type=Path,
                    help="also write each timed variant's CUDA kernels (torch.profiler, ms a call) to this JSON file")
    ap.add_argument("-o", "--output")
    return ap


@holds_gpu
def check(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)

    manifest_path = args.composed / "manifest.json"
    if not manifest_path.is_file():
        print(f"e2e_check: {manifest_path} not found; pass the folder `fact compose --out` wrote", file=sys.stderr)
        return EXIT_USAGE
    manifest = json.loads(manifest_path.read_text())
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    result = {"device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
              "numerics": args.numerics, "float32_matmul_precision": PRECISION[args.numerics],
              "dtype": str(DTYPE[args.numerics]).replace("torch.", ""), "atol": ATOL, "rtol": RTOL,
              "cudnn_allow_tf32": not args.no_cudnn_tf32}

    def finish(code: int) -> int:
        text = json.dumps(result, indent=1)
        if args.output:
            Path(args.output).write_text(text + "\n")
        print(text)
        return code

    load_error = None
    try:
        # In `fact`'s long-lived Python worker the op library build has already loaded this library (from the
        # op library folder; args.lib is the composed folder's copy): loading the copy too would register the
        # same ops twice, which aborts the process. As the composed module itself does, load only what is missing.
        if args.lib:
            if missing_ops(manifest):
                load_op_library(args.lib)
        elif args.reference:
            from fact.compose.reference_ops import register_reference_ops
            register_reference_ops(manifest)
    except Exception as e:  # noqa: BLE001 - reported with the ops it leaves missing
        load_error = f"{type(e).__name__}: {e}"[:2000]
    result["missing_ops"] = missing_ops(manifest)
    if result["missing_ops"]:
        result["status"] = "ops_missing"
        result["error"] = load_error or f"not in {args.lib or 'the reference ops'}"
        return finish(EXIT_OPS_MISSING)

    torch.set_float32_matmul_precision(PRECISION[args.numerics])
    # Every variant in this process (eager, torch.compile, the composed module's PyTorch convolutions) alike.
    torch.backends.cudnn.allow_tf32 = not args.no_cudnn_tf32
    dtype = DTYPE[args.numerics]
    mod = load_composed(args.composed)
    torch.manual_seed(0)
    init = mod.get_init_inputs()
    state = mod.Model(*init).state_dict()

    def build(cls, to_dtype):
        # Each variant is built afresh and given the same state, not deep-copied: a copy would share what a
        # forward's lambdas and closures captured (submodules of the first instance, left on the CPU).
        torch.manual_seed(0)
        model = cls(*init).eval()
        model.load_state_dict(state, strict=True)
        return model.to(device=device, dtype=to_dtype)

    reference64 = build(mod.Model, torch.float64)
    original = build(mod.Model, dtype)
    composed = build(mod.ModelNew, dtype)
    composed.fact_cuda_graphs = False  # checked and timed op by op; the graphed replay is timed beside it

    def fresh_inputs(seed):
        torch.manual_seed(seed)
        # Drawn on the device: KernelBench's level-1 inputs are GBs, and drawing them on the CPU took most of a
        # minute per problem on the H100 machine (the values differ from CPU draws; every variant gets the same).
        with torch.device(device):
            raw = mod.get_inputs()
        return cast_inputs(raw, dtype, device), raw

    def seeded(model, inputs, seed):
        # A forward that draws random numbers (KernelBench's LSTMs draw their initial state) draws the same ones
        # in every variant.
        torch.manual_seed(seed)
        return model(*inputs)

    def reference(raw, seed):
        """The original run in float64, or None where it cannot run so (a forward that makes float32 tensors of
        its own, or a float64 copy of multi-GB inputs that does not fit in GPU memory): the check then compares
        the composed module with the original alone, and says why."""
        try:
            return seeded(reference64, cast_inputs(raw, torch.float64, device), seed)
        except torch.OutOfMemoryError as e:
            torch.cuda.empty_cache()
            result.setdefault("reference_error", "the float64 reference did not fit in GPU memory (rel err vs float64 "
                              f"not computed): {e}"[:1000])
            return None
        except Exception as e:  # noqa: BLE001 - reported in the result
            result.setdefault("reference_error", f"the float64 reference failed: {type(e).__name__}: {e}"[:1000])
            return None

    trials = []
    with torch.no_grad():
        for t in range(args.trials):
            inputs, raw = fresh_inputs(1000 + t)  # fresh inputs every trial
            ref = reference(raw, 1000 + t)
            del raw
            out_o = seeded(original, inputs, 1000 + t)
            try:
                out_c = seeded(composed, inputs, 1000 + t)
            except Exception as e:  # noqa: BLE001 - a composed module that cannot run is incorrect, said so
                result.update(correct=False, status="incorrect", trials=trials,
                              error=f"composed module raised {type(e).__name__}: {e}"[:2000])
                return finish(EXIT_INCORRECT)
            close, max_diff, exact = compare(out_c, out_o)
            err_c, err_o = float64_errors(out_c, ref), float64_errors(out_o, ref)
            # The float64 rule only where the results have one structure and their other leaves are equal.
            float64_rule = not close and max_diff is not None and exact and as_accurate(err_c, err_o)
            trials.append({"allclose_1e-2": close, "max_abs_diff": max_diff,
                           "correct_by": "allclose_1e-2" if close else "float64" if float64_rule else None,
                           "rel_err_composed": err_c[0] if err_c else None,
                           "rel_err_original": err_o[0] if err_o else None,
                           "max_abs_err_composed": err_c[1] if err_c else None,
                           "max_abs_err_original": err_o[1] if err_o else None})
            del ref, out_o, out_c
        result["correct"] = all(t["correct_by"] for t in trials)
        result["trials"] = trials
        for key in ("rel_err_composed", "rel_err_original"):  # None where no result has a floating tensor
            errs = [t[key] for t in trials if t[key] is not None]
            result[key] = max(errs) if errs else None

        inputs, raw = fresh_inputs(2000)
        ref = reference(raw, 2000)
        del reference64, raw
        variants, timed = {}, {}
        variants["eager"], timed["eager"] = run_variant("eager", lambda: original, inputs, ref, cuda)
        variants["composed"], timed["composed"] = run_variant("composed", lambda: composed, inputs, ref, cuda)
        input_bytes = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
        big_inputs = cuda and input_bytes > GRAPH_MAX_INPUT_BYTES
        too_big = f"inputs of {input_bytes / 2**30:.1f} GiB, copied into a CUDA graph's own every call"
        graphed = cuda and timed["composed"] is not None and not big_inputs
        if graphed:
            timed["composed_graphed"] = graphed_calls(composed)
        elif cuda and timed["composed"] is not None:
            result["replay"] = choose_replay(None, None, too_big)
            write_replay_choice(args.composed, result["replay"])
        for name, mode, skip in (("compile_default", None, "--no-compile" if args.no_compile else ""),
                                 ("compile_reduce_overhead", "reduce-overhead",
                                  "--no-compile" if args.no_compile else too_big if big_inputs else ""),
                                 ("compile_max_autotune", "max-autotune",
                                  "--no-compile" if args.no_compile else "--no-max-autotune" if args.no_max_autotune else "")):
            if skip:
                variants[name] = {"status": "skipped", "error": f"not run ({skip})"}
            else:
                variants[name], timed[name] = run_variant(
                    name, lambda mode=mode: compiled(lambda: build(mod.Model, dtype), mode, args.compile_backend),
                    inputs, ref, cuda)
        timed = {name: fn for name, fn in timed.items() if fn is not None}
        measured = {}
        if cuda and timed:
            try:
                measured = interleaved_ms(timed, inputs, args.iters)
            except Exception as e:  # noqa: BLE001 - a variant failing on a later call: reported, nothing timed
                for name in timed:
                    if name in variants:
                        variants[name].update(status="failed", error=f"timing: {type(e).__name__}: {e}"[:2000])
        if graphed:
            result["replay"] = choose_replay(measured.get("composed"), measured.pop("composed_graphed", None),
                                             graph_mismatch(composed, inputs))
            write_replay_choice(args.composed, result["replay"])
            if result["replay"]["chosen"] == "cuda_graph":  # the delivered module's time
                measured["composed"] = result["replay"]["cuda_graph_ms"]
            print(f"e2e_check: replay: {result['replay']['why']}", file=sys.stderr)
        for name, ms in measured.items():
            variants[name]["ms"] = ms
            print(f"e2e_check: {name}: {ms:.4f} ms", file=sys.stderr)
        if args.profile and cuda and timed:
            profiles = profile_variants(timed, inputs)
            write_profile(args.profile, profiles, {"device": result["device"], "torch": result["torch"],
                                                   "numerics": args.numerics})
            print("\n".join(f"e2e_check: profile: {line}" for line in summary_lines(profiles)), file=sys.stderr)
    result["variants"] = variants
    result["timing"] = (f"median of {args.iters} interleaved rounds (each variant once per round, rotated order), "
                        "each a CUDA-event-timed batch of back-to-back calls" if cuda else
                        "no CUDA GPU: correctness only, nothing timed")
    for name in VARIANTS:
        result[f"{name}_ms"] = variants[name].get("ms")
    if result["eager_ms"] and result["composed_ms"]:
        result["speedup"] = result["eager_ms"] / result["composed_ms"]
    result["status"] = "ok" if result["correct"] else "incorrect"
    return finish(EXIT_OK if result["correct"] else EXIT_INCORRECT)


if __name__ == "__main__":
    raise SystemExit(main())
