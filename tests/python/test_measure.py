"""Tests of fact.realize.measure: ABI mirror, request validation, tolerances, verifier, isolation.

CPU-side tests run everywhere; tests that need a CUDA GPU (and nvcc) skip with a reason elsewhere.
"""
from __future__ import annotations

import ctypes
import io
import json
import math
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from fact.realize import kernel_abi, measure, timing, verify  # noqa: E402
from fact.realize.gemm_case import GemmCase, GemmProblem, torch_epilogue_gemm  # noqa: E402
from fact.realize.measure_request import RequestError, load_request, parse_request  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


def has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


def minimal_request(**overrides) -> dict:
    req = {"problem": {"m": 64, "n": 32, "k": 16, "dtype": "float32"},
           "candidates": [{"id": "k0", "library": "/abs/k0.so"}]}
    req.update(overrides)
    return req


# -- the ABI mirror ------------------------------------------------------------------------------

STATUSES = [
    "FACT_OK", "FACT_ERR_SHAPE", "FACT_ERR_WORKSPACE", "FACT_ERR_INIT", "FACT_ERR_LAUNCH", "FACT_ERR_UNSUPPORTED"]


@pytest.mark.parametrize("family", sorted(kernel_abi.FAMILY_ABIS))
def test_struct_layout_matches_c_header(tmp_path, kernel_abi_include, family):
    """The rendered header (C++) and the ctypes mirror (Python), both built from the family's data, agree on
    sizeof and every offsetof, the constants, the ABI version and the status codes."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler (gcc/cc) on PATH to compile kernel_abi.h")
    abi = kernel_abi.FAMILY_ABIS[family]
    struct = abi.struct.__name__
    fields = [name for name, _ in abi.struct._fields_]
    lines = [f'printf("sizeof %zu\\n", sizeof({struct}));',
             'printf("FACT_KERNEL_ABI_VERSION %d\\n", FACT_KERNEL_ABI_VERSION);']
    lines += [f'printf("{f} %zu\\n", offsetof({struct}, {f}));' for f in fields]
    lines += [f'printf("{c} %d\\n", (int){c});' for c in [*STATUSES, *abi.constants]]
    src = tmp_path / "layout.c"
    src.write_text("#include <stdio.h>\n#include <stddef.h>\n#include \"kernel_abi.h\"\nint main(void) {\n"
                   + "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run([gcc, "-Wall", "-Werror", "-I", str(kernel_abi_include), str(src), "-o", str(exe)], check=True)
    out = dict(line.split() for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                       check=True).stdout.splitlines())
    assert int(out["sizeof"]) == ctypes.sizeof(abi.struct)
    for f in fields:
        assert int(out[f]) == getattr(abi.struct, f).offset, f
    assert int(out["FACT_KERNEL_ABI_VERSION"]) == kernel_abi.FACT_KERNEL_ABI_VERSION
    for s in STATUSES:
        assert int(out[s]) == getattr(kernel_abi, s), s
    for c, value in abi.constants.items():
        assert int(out[c]) == value == getattr(kernel_abi, c), c


@pytest.mark.parametrize("family", sorted(kernel_abi.FAMILY_ABIS))
def test_header_fields_all_mirrored(kernel_abi_include, family):
    """Every member named in the C struct appears in the ctypes mirror (catches a field rendered in C only)."""
    struct = kernel_abi.args_type(family)
    text = (kernel_abi_include / "kernel_abi.h").read_text()
    body = text[text.index(f"typedef struct {struct.__name__} {{"):text.index(f"}} {struct.__name__};")]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    declared = set(re.findall(r"\b([a-z_]+)\s*(?:\[\w+\])?\s*[;,]", body))
    assert declared == {name for name, _ in struct._fields_}


def test_mirror_names_and_workspace_follow_the_data():
    assert kernel_abi.args_type("gemm") is kernel_abi.FactGemmArgs and kernel_abi.has_workspace("gemm")
    assert kernel_abi.args_type("rowwise") is kernel_abi.FactRowwiseArgs and not kernel_abi.has_workspace("rowwise")
    assert kernel_abi.FACT_ROWWISE_MAX_INPUTS == 8
    assert kernel_abi.FactRowwiseArgs.inputs.size == 8 * ctypes.sizeof(ctypes.c_void_p)
    with pytest.raises(ValueError, match="'deconv' is not one of attention, conv, gemm"):
        kernel_abi.args_type("deconv")


def rope_abi(**change) -> dict:
    abi = json.loads((ROOT / "data" / "families" / "rope.json").read_text())["abi"]
    return {**abi, **change}


def test_malformed_abi_is_refused_naming_family_and_field():
    v = kernel_abi.VOCABULARY
    assert kernel_abi.parse_family_abi("rope", rope_abi(), v).struct.__name__ == "FactRopeArgs"
    fields = rope_abi()["fields"]
    bad_type = [*fields[:5], {**fields[5], "type": "int16"}, *fields[6:]]
    field = r"kernel family 'rope' .*abi\.fields\[5\] \(\"x_batch_stride\"\)"
    with pytest.raises(kernel_abi.KernelAbiError, match=field + r"\.type: \"int16\" is not a type"):
        kernel_abi.parse_family_abi("rope", rope_abi(fields=bad_type), v)
    bad_length = [*fields[:5], {**fields[5], "type": "int64[FACT_ROPE_MAX]"}, *fields[6:]]
    with pytest.raises(kernel_abi.KernelAbiError, match=r"'rope'.*x_batch_stride.*\"FACT_ROPE_MAX\" is neither"):
        kernel_abi.parse_family_abi("rope", rope_abi(fields=bad_length), v)
    with pytest.raises(kernel_abi.KernelAbiError, match=r"'rope'.*abi\.fields\[1\] \(\"batch\"\): a second field"):
        kernel_abi.parse_family_abi("rope", rope_abi(fields=[fields[0], fields[0]]), v)
    with pytest.raises(kernel_abi.KernelAbiError, match=r"'rope'.*abi\.functions: lacks \"run\""):
        kernel_abi.parse_family_abi("rope", rope_abi(functions=["can_implement", "describe"]), v)
    with pytest.raises(kernel_abi.KernelAbiError, match=r"'rope'.*\"abi\" is missing"):
        kernel_abi.parse_family_abi("rope", None, v)


def test_kernel_library_load_errors(tmp_path):
    with pytest.raises(kernel_abi.KernelLoadError, match="no such file"):
        kernel_abi.KernelLibrary(tmp_path / "missing.so", "k0")
    with pytest.raises(kernel_abi.KernelLoadError, match="C identifier"):
        kernel_abi.KernelLibrary(tmp_path / "missing.so", "bad-id")
    not_a_library = tmp_path / "text.so"
    not_a_library.write_text("hello")
    with pytest.raises(kernel_abi.KernelLoadError, match="dlopen failed"):
        kernel_abi.KernelLibrary(not_a_library, "k0")


# -- request validation --------------------------------------------------------------------------

def test_minimal_request_gets_defaults():
    r = parse_request(minimal_request())
    assert r.problem == GemmProblem(64, 32, 16, 1, "row", "row", "float32", "fp32", "none")
    assert (r.trials, r.baseline, r.warmup_ms, r.rep_ms) == (3, True, 25.0, 200.0)
    assert parse_request(minimal_request(problem={"m": 1, "n": 1, "k": 1, "dtype": "bfloat16"})).problem.numerics == "bf16"


@pytest.mark.parametrize("patch, field", [
    ({"problem": {"n": 32, "k": 16, "dtype": "float32"}}, "request.problem.m"),
    ({"problem": {"m": 0, "n": 32, "k": 16, "dtype": "float32"}}, "request.problem.m"),
    ({"problem": {"m": True, "n": 32, "k": 16, "dtype": "float32"}}, "request.problem.m"),
    ({"problem": {"m": 2, "n": 32, "k": 16.5, "dtype": "float32"}}, "request.problem.k"),
    ({"problem": {"m": 2, "n": 32, "k": 16, "dtype": "float64"}}, "request.problem.dtype"),
    ({"problem": {"m": 2, "n": 32, "k": 16, "dtype": "float32", "layout_a": "rowmajor"}}, "request.problem.layout_a"),
    ({"problem": {"m": 2, "n": 32, "k": 16, "dtype": "bfloat16", "numerics": "tf32"}}, "request.problem.numerics"),
    ({"problem": {"m": 2, "n": 32, "k": 16, "dtype": "float32", "epilogue": "gelu"}}, "request.problem.epilogue"),
    ({"problem": {"m": 2, "n": 32, "k": 16, "dtype": "float32", "alpha": 2}}, "request.problem: unknown key"),
    ({"candidates": [{"id": "a-b", "library": "/x.so"}]}, "request.candidates[0].id"),
    ({"candidates": [{"id": "a", "library": "x.so"}]}, "request.candidates[0].library"),
    ({"candidates": [{"id": "a", "library": "/x.so"}, {"id": "a", "library": "/y.so"}]}, "appears twice"),
    ({"candidates": {"id": "a"}}, "request.candidates"),
    ({"candidates": [{"id": "a", "library": "/x.so", "kernel": "k-1"}]}, "request.candidates[0].kernel"),
    ({"candidates": [{"id": "a", "library": "/x.so", "arguments": {"swizzle": "4"}}]}, "request.candidates[0].arguments"),
    ({"candidates": [{"id": "a", "library": "/x.so", "arguments": [4]}]}, "request.candidates[0].arguments"),
    ({"trials": 0}, "request.trials"),
    ({"baseline": "yes"}, "request.baseline"),
    ({"rep_ms": -1}, "request.rep_ms"),
    ({"repeat": 3}, "request: unknown key"),
])
def test_request_errors_name_the_field(patch, field):
    with pytest.raises(RequestError) as e:
        parse_request(minimal_request(**patch))
    assert field in str(e.value)


def test_load_request_reports_json_position(tmp_path):
    p = tmp_path / "req.json"
    p.write_text('{"problem": {"m": 1,}}')
    with pytest.raises(RequestError, match=r"req\.json:1:\d+: not valid JSON"):
        load_request(p)
    with pytest.raises(RequestError, match="cannot read"):
        load_request(tmp_path / "absent.json")


# -- tolerances and the verifier (on CPU tensors) ------------------------------------------------

def test_tolerance_table_orders_and_ranges():
    t = {n: verify.tolerance(n, 1024) for n in verify.BASE_TOLERANCE}
    assert t["fp32"] < t["3xtf32"] < t["tf32"] <= t["bf16"]
    assert t["fp16"] <= t["bf16"]
    assert 1e-5 <= t["fp32"] <= 1e-4 and 1e-5 <= t["3xtf32"] <= 1e-4
    assert 1e-3 <= t["tf32"] <= 1e-2 and 5e-3 <= t["bf16"] <= 3e-2
    assert verify.tolerance("fp32", 1 << 19) > 10 * verify.tolerance("fp32", 16) / 2
    assert set(verify.tolerance_table(64)["at_this_k"]) == set(verify.BASE_TOLERANCE)


def test_rotation_count_covers_twice_l2():
    l2 = 50 << 20
    assert timing.rotation_count(1 << 30, l2) == 1
    assert timing.rotation_count(192 << 20, l2) == 2  # a few L2 sizes: still alternate two sets
    n = timing.rotation_count(12 << 20, l2)
    assert n * (12 << 20) >= 2 * l2 and (n - 1) * (12 << 20) < 2 * l2
    assert timing.rotation_count(16, l2) == timing.MAX_SETS


def cpu_problem(**kw) -> GemmProblem:
    base = dict(m=24, n=40, k=56, batch=2, layout_a="col", layout_b="row", dtype="float32", numerics="fp32",
                epilogue="bias_gelu_tanh")
    base.update(kw)
    return GemmProblem(**base)


def test_operands_layout_and_never_zero():
    torch = pytest.importorskip("torch")
    p = cpu_problem(layout_a="col", layout_b="col", epilogue="bias_residual")
    case = GemmCase(p)
    ops = case.make_inputs("cpu")
    assert ops.a_storage.shape == (2, 56, 24) and ops.a.shape == (2, 24, 56) and ops.lda == 24
    assert ops.b_storage.shape == (2, 40, 56) and ops.b.shape == (2, 56, 40) and ops.ldb == 56
    assert torch.equal(ops.a, ops.a_storage.transpose(1, 2))
    assert ops.bias.shape == (40,) and ops.residual.shape == (2, 24, 40)
    assert bool(torch.isnan(ops.d_buffer).all())
    for t in (ops.a_storage, ops.b_storage, ops.bias, ops.residual):
        assert float(t.abs().min()) >= 0 and float(t.abs().mean()) > 0.01
    assert case.bytes_per_set() == 4 * (2 * (24 * 56 + 56 * 40 + 24 * 40) + 40 + 2 * 24 * 40)
    assert case.input_tensors(ops) == [ops.a_storage, ops.b_storage, ops.bias, ops.residual]
    assert case.pre_kernel() is None  # only SwiGLU computes a kernel input with PyTorch first


class FakePreparingLibrary:
    """A kernel library's prepared_b_bytes / prepare_b, recording what it was handed."""

    def __init__(self, size, code=0):
        self.size, self.code, self.prepared = size, code, []

    def prepared_b_bytes(self, args):
        return self.size

    def prepare_b(self, args, out_ptr):
        self.prepared.append(out_ptr)
        return self.code


def test_a_constant_b_is_kept_between_calls_only_when_the_kernel_copies_it():
    pytest.importorskip("torch")
    p = parse_request(minimal_request(problem={"m": 8, "n": 16, "k": 32, "dtype": "float32", "numerics": "3xtf32",
                                               "b_constant": True})).problem
    assert p.b_constant
    assert not parse_request(minimal_request()).problem.b_constant
    case = GemmCase(p)
    ops = case.make_inputs("cpu")
    args = case.kernel_args(ops, 0)
    assert args.prepared_b is None
    lib = FakePreparingLibrary(4096)
    kept = case.keep_between_calls(lib, ops, args)
    assert kept is not None and kept.numel() == 4096
    assert lib.prepared == [kept.data_ptr()] and args.prepared_b == kept.data_ptr()
    # A kernel that reads B as it is (0 bytes), or a B that is not a weight: nothing is kept.
    assert case.keep_between_calls(FakePreparingLibrary(0), ops, case.kernel_args(ops, 0)) is None
    plain = GemmCase(parse_request(minimal_request()).problem)
    plain_ops = plain.make_inputs("cpu")
    assert plain.keep_between_calls(lib, plain_ops, plain.kernel_args(plain_ops, 0)) is None
    with pytest.raises(RuntimeError, match="prepare_b returned 4"):
        case.keep_between_calls(FakePreparingLibrary(64, code=4), ops, case.kernel_args(ops, 0))


def test_reference_applies_epilogue():
    torch = pytest.importorskip("torch")
    case = GemmCase(cpu_problem(epilogue="bias_relu"))
    ops = case.make_inputs("cpu")
    ref = case.reference(ops)
    manual = torch.clamp(ops.a.double() @ ops.b.double() + ops.bias.double(), min=0)
    assert set(ref) == set(ops.outputs) == {"d"}
    assert ref["d"].dtype == torch.float64 and torch.allclose(ref["d"], manual)
    case2 = GemmCase(cpu_problem(epilogue="bias_residual"))
    ops2 = case2.make_inputs("cpu")
    manual2 = ops2.a.double() @ ops2.b.double() + ops2.bias.double() + ops2.residual.double()
    assert torch.allclose(case2.reference(ops2)["d"], manual2)


def test_swiglu_operands_reference_and_pytorch_path():
    """bias_silu_mul verifies the whole SwiGLU subgraph: the reference is built from A, B, B_up and both
    biases in float64, U is computed by PyTorch (as the composed module does) into the residual slot."""
    torch = pytest.importorskip("torch")
    p = cpu_problem(batch=1, layout_a="row", layout_b="col", epilogue="bias_silu_mul")
    assert p.swiglu and p.has_residual and p.has_bias and p.tree[0] == "mul" and p.tree[1][0] == "silu"
    case = GemmCase(p)
    ops = case.make_inputs("cpu")
    assert ops.up_b.shape == ops.b.shape == (1, 56, 40) and ops.up_b.stride() == ops.b.stride()
    assert ops.up_bias.shape == (40,) and not torch.equal(ops.up_b, ops.b)
    assert bool(torch.isnan(ops.residual).all())  # U is not there until PyTorch computes it
    case.pre_kernel()(ops)
    u = ops.a[0].double() @ ops.up_b[0].double() + ops.up_bias.double()
    assert torch.allclose(ops.residual[0].double(), u, rtol=1e-5, atol=1e-5)
    gate = ops.a[0].double() @ ops.b[0].double() + ops.bias.double()
    ref = case.reference(ops)["d"]
    assert torch.allclose(ref[0], torch.nn.functional.silu(gate) * u)
    tol = case.tolerance()
    assert verify.compare(torch_epilogue_gemm(p, ops), ref, tol).passed
    # What the kernel computes from the prepared U passes; adding U (the residual epilogue) does not.
    kernel = torch.nn.functional.silu(ops.a @ ops.b + ops.bias) * ops.residual
    assert verify.compare(kernel, ref, tol).passed
    assert not verify.compare(torch.nn.functional.silu(ops.a @ ops.b + ops.bias) + ops.residual, ref, tol).passed
    # The up weights and U count toward the bytes that rotate through L2.
    assert case.bytes_per_set() == 4 * ((24 * 56 + 56 * 40 + 24 * 40) + 40 + 24 * 40 + 56 * 40 + 40)
    snapshot = verify.snapshot(case.input_tensors(ops))
    assert verify.unchanged(case.input_tensors(ops), snapshot)
    ops.up_b_storage.add_(1.0)
    assert not verify.unchanged(case.input_tensors(ops), snapshot)


def fill_d(ops, values):
    ops.d.copy_(values.to(ops.d.dtype))


def test_compare_accepts_fp32_and_catches_faults():
    torch = pytest.importorskip("torch")
    case = GemmCase(cpu_problem())
    tol = case.tolerance()
    ops = case.make_inputs("cpu")
    ref = case.reference(ops)["d"]
    fp32 = torch.nn.functional.gelu(ops.a @ ops.b + ops.bias, approximate="tanh")
    fill_d(ops, fp32)
    good = verify.compare(ops.d, ref, tol, ops.d_buffer)
    assert good.passed and good.rel_err < 1e-6, good

    ops.d_buffer.fill_(float("nan"))
    fill_d(ops, fp32)
    ops.d[1, -1, -1] = float("nan")  # one element never written
    c = verify.compare(ops.d, ref, tol, ops.d_buffer)
    assert not c.passed and "not written" in c.message and "[1, 23, 39]" in c.message

    ops.d_buffer.fill_(float("nan"))
    fill_d(ops, fp32)
    ops.d_buffer[verify.GUARD_ELEMENTS + ops.d.numel()] = 1.0  # one element past D
    c = verify.compare(ops.d, ref, tol, ops.d_buffer)
    assert not c.passed and "outside D" in c.message

    ops.d_buffer.fill_(float("nan"))
    fill_d(ops, fp32)
    ops.d[0, 3, 5] += 0.05 * float(ref.abs().max())  # one wrong element: Frobenius barely moves
    c = verify.compare(ops.d, ref, tol, ops.d_buffer)
    assert not c.passed and c.max_err_vs_peak > tol


def test_compare_bf16_tolerance_separates_rounding_from_a_dropped_k_step():
    torch = pytest.importorskip("torch")
    case = GemmCase(cpu_problem(dtype="bfloat16", numerics="bf16", epilogue="none", batch=1, m=64, n=64, k=1024))
    tol = case.tolerance()
    ops = case.make_inputs("cpu")
    ref = case.reference(ops)["d"]
    rounded = verify.compare(ref.to(torch.bfloat16), ref, tol)
    assert rounded.passed and 3e-4 < rounded.rel_err < 3e-3  # bf16 output rounding only
    dropped = (ops.a[..., :-1].double() @ ops.b[:, :-1, :].double()).to(torch.bfloat16)
    assert not verify.compare(dropped, ref, tol).passed


# -- isolation: measure.py with a fake worker (no GPU needed) ------------------------------------

FAKE_WORKER = (sys.executable, str(DATA / "fake_measure_worker.py"))


def orchestrate(tmp_path, ids, monkeypatch, baseline=True, timeout_s=2.0, setup_fail=False, **request):
    log = tmp_path / "workers.log"
    monkeypatch.setenv("FAKE_WORKER_LOG", str(log))
    if setup_fail:
        monkeypatch.setenv("FAKE_WORKER_SETUP", "fail")
    req = parse_request(minimal_request(candidates=[{"id": i, "library": f"/abs/{i}.so"} for i in ids],
                                        baseline=baseline, timeout_s=timeout_s, **request))
    result = measure.Orchestrator(req, worker_argv=FAKE_WORKER, log=sys.stderr).run()
    workers = [json.loads(line) for line in log.read_text().splitlines()]
    return result, workers


def test_crash_hang_and_lost_context_do_not_take_others_down(tmp_path, monkeypatch):
    ids = ["ok_a", "segv_b", "ok_c", "hang_d", "lost_e", "garbage_f", "ok_g"]
    result, workers = orchestrate(tmp_path, ids, monkeypatch)
    status = {c["id"]: c["status"] for c in result["candidates"]}
    assert status == {"ok_a": "ok", "segv_b": "crashed", "ok_c": "ok", "hang_d": "timeout",
                      "lost_e": "crashed", "garbage_f": "ok", "ok_g": "ok"}
    by_id = {c["id"]: c for c in result["candidates"]}
    assert "SIGSEGV" in by_id["segv_b"]["message"] and "about to segfault" in by_id["segv_b"]["message"]
    assert "2 s" in by_id["hang_d"]["message"]
    assert by_id["ok_a"]["message"] is None and by_id["ok_a"]["library"] == "/abs/ok_a.so"
    assert [c["id"] for c in result["candidates"]] == ids
    # One worker per failure plus the first: the baseline ran once, each restart got only what was left.
    assert [w["candidates"][0] for w in workers] == ["ok_a", "ok_c", "lost_e", "garbage_f"]
    assert [w["baseline"] for w in workers] == [True, False, False, False]
    assert result["baseline"]["status"] == "ok" and result["fp32_reference_err"] == 1e-7
    assert result["device"] == "Fake GPU" and result["error"] is None
    assert result["tolerances"]["applied"] == verify.tolerance("fp32", 16)
    assert result["tolerances"]["at_this_k"]["tf32"] == verify.tolerance("tf32", 16)
    assert result["settings"]["family"] == "gemm" and result["problem"]["m"] == 64


def test_a_hung_kernel_is_not_run_again_under_other_arguments(tmp_path, monkeypatch):
    """Run-time variants share their kernel's library: after one hangs, its siblings are skipped (each would wait out
    the time limit again), while another kernel's candidates still run."""
    monkeypatch.setenv("FAKE_WORKER_LOG", str(tmp_path / "workers.log"))
    libs = {"hang_a": "/abs/k1.so", "ok_b": "/abs/k1.so", "ok_c": "/abs/k2.so", "ok_d": "/abs/k1.so"}
    req = parse_request(minimal_request(candidates=[{"id": i, "library": lib, "kernel": "k1" if lib.endswith("k1.so") else "k2"}
                                                    for i, lib in libs.items()], timeout_s=2.0))
    # Its log is the stderr of the moment (fact's long-lived worker points sys.stderr at each request's file).
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    result = measure.Orchestrator(req, worker_argv=FAKE_WORKER).run()
    assert "candidate hang_a timeout" in sys.stderr.getvalue()
    by_id = {c["id"]: c for c in result["candidates"]}
    assert {i: c["status"] for i, c in by_id.items()} == {"hang_a": "timeout", "ok_b": "skipped", "ok_c": "ok",
                                                          "ok_d": "skipped"}
    assert "k1 hung as candidate hang_a" in by_id["ok_b"]["message"]


def test_worker_setup_failure_marks_everything(tmp_path, monkeypatch):
    result, workers = orchestrate(tmp_path, ["ok_a", "ok_b"], monkeypatch, setup_fail=True)
    assert len(workers) == measure.MAX_FAILED_STARTS
    assert all(c["status"] == "crashed" and "set-up exploded" in c["message"] for c in result["candidates"])
    assert result["baseline"]["status"] == "failed" and "set-up" in result["error"]


def test_family_result_takes_the_case_tolerance(tmp_path, monkeypatch):
    norm = {"kind": "layer_norm", "rows": 8, "cols": 4096, "eps": 1e-5, "dtype": "bfloat16"}
    result, _ = orchestrate(tmp_path, ["ok_a"], monkeypatch, family="normalization", problem=norm)
    assert result["tolerances"]["applied"] == verify.tolerance("bf16", 4096)
    assert set(result["tolerances"]) == {"applied", "numerics", "why"} and result["tolerances"]["numerics"] == "bf16"
    assert result["settings"]["family"] == "normalization" and result["problem"]["cols"] == 4096


def test_no_candidates_still_reports_baseline(tmp_path, monkeypatch):
    result, workers = orchestrate(tmp_path, [], monkeypatch)
    assert len(workers) == 1 and result["candidates"] == [] and result["baseline"]["ms"] == 1.0


def test_a_worker_started_ahead_takes_the_next_request(tmp_path, monkeypatch):
    """--prewarm's spare measures the next request (its job arrives on stdin); a request after that, or one in
    another environment, gets a fresh worker; a spare nobody takes exits at the end of its stdin."""
    monkeypatch.setenv("FAKE_WORKER_LOG", str(tmp_path / "workers.log"))
    assert measure.prewarm(FAKE_WORKER) and not measure.prewarm(FAKE_WORKER)  # one spare, kept
    spare = measure.Spare.current
    time.sleep(1.0)  # the spare waits for its job
    result, workers = orchestrate(tmp_path, ["ok_a", "segv_b", "ok_c"], monkeypatch)
    assert [c["status"] for c in result["candidates"]] == ["ok", "crashed", "ok"]
    assert workers[0]["pid"] == spare.proc.pid and workers[0]["waited_s"] > 0.1
    assert workers[1]["pid"] != spare.proc.pid and measure.Spare.current is None and not spare.dir.exists()

    measure.prewarm(FAKE_WORKER)
    other = measure.Spare.current
    monkeypatch.setenv("FACT_SOMETHING_ELSE", "1")  # another environment: the spare is not used, and it ends
    result, workers = orchestrate(tmp_path, ["ok_d"], monkeypatch)
    assert result["candidates"][0]["status"] == "ok" and workers[-1]["pid"] != other.proc.pid
    assert other.proc.returncode == 0

    measure.prewarm(FAKE_WORKER)
    unused = measure.Spare.current
    measure.end_spare()
    assert unused.proc.returncode == 0 and not unused.dir.exists()


def test_prewarm_without_a_gpu_starts_nothing(monkeypatch):
    monkeypatch.setattr(measure, "cuda_unavailable_reason", lambda: "no CUDA device (test)")
    monkeypatch.setattr(measure, "prewarm", lambda *a: pytest.fail("a worker was started without a GPU"))
    assert measure.main(["--prewarm"]) == measure.EXIT_NO_GPU


# -- the command line -----------------------------------------------------------------------------

def run_measure(tmp_path, request: dict):
    req = tmp_path / "req.json"
    req.write_text(json.dumps(request))
    out = tmp_path / "result.json"
    env = {"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "fact.realize.measure", str(req), "-o", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    return proc, out


def test_bad_request_exits_2(tmp_path):
    proc, out = run_measure(tmp_path, minimal_request(trials=0))
    assert proc.returncode == 2 and "request.trials" in proc.stderr and not out.exists()


def test_cpu_only_machine_exits_3(tmp_path):
    if has_cuda():
        pytest.skip("this machine has a CUDA GPU; the CPU-only exit cannot be observed here")
    proc, out = run_measure(tmp_path, minimal_request())
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "CUDA GPU is required" in lines[0]
    assert not out.exists()


# -- on a GPU: the naive ABI kernel from bench/scripts ---------------------------------------------

def build_naive(tmp_path, include: Path, kernel_id: str, *defines: str) -> Path:
    so = tmp_path / f"{kernel_id}.so"
    subprocess.run(["nvcc", "-O2", "-std=c++17", "-arch=sm_90a", "-shared", "-Xcompiler", "-fPIC",
                    "-I", str(include), f"-DFACT_ID={kernel_id}", *defines,
                    str(ROOT / "bench" / "scripts" / "naive_gemm_abi.cu"), "-o", str(so)], check=True)
    return so


def test_gpu_naive_kernel_passes_and_bug_is_caught(tmp_path, kernel_abi_include):
    if not has_cuda():
        pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False)")
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc to build bench/scripts/naive_gemm_abi.cu")
    import torch
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the test builds for sm_90a (Hopper)")
    good = build_naive(tmp_path, kernel_abi_include, "good_rc", "-DFACT_B_COL=1", "-DFACT_EPILOGUE=3")
    bad = build_naive(tmp_path, kernel_abi_include, "bad_rc", "-DFACT_B_COL=1", "-DFACT_EPILOGUE=3",
                      "-DFACT_NAIVE_BUG=1")
    proc, out = run_measure(tmp_path, {
        "problem": {"m": 200, "n": 136, "k": 264, "batch": 3, "layout_b": "col", "dtype": "float32",
                    "epilogue": "bias_silu"},
        "candidates": [{"id": "good_rc", "library": str(good)}, {"id": "bad_rc", "library": str(bad)}],
        "trials": 2, "rep_ms": 20, "warmup_ms": 5})
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
    good_r, bad_r = r["candidates"]
    assert good_r["status"] == "ok" and good_r["ms"] > 0 and good_r["rel_err"] < good_r["tolerance"]
    assert bad_r["status"] == "verify_failed" and "tolerance" in bad_r["message"]
    assert r["baseline"]["status"] == "ok" and r["baseline"]["ms"] > 0
    assert 0 < r["fp32_reference_err"] < 1e-5
