"""CPU-side checks of the op library's Python half: manifest parsing, the command lines the builder
assembles (against src/realize/nvcc_command.cpp's flags), diagnostics trimming, the exit paths of
op_library_build and op_check on a machine without a CUDA torch or GPU, and the builder's caches (torch's
build flags, ops.cpp's object, the linked library)."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from fact.realize import family_cases, kernel_abi, op_check, op_library_build as olb

CONFIG_ID = "0123456789ab"
SM80_ID = "ba9876543210"


def nvcc_args(gencode: str) -> list[str]:
    """What src/realize/op_library.cpp writes: nvcc_command()'s argv after the executable."""
    return ["-std=c++17", "-O3", "--expt-relaxed-constexpr", gencode, "-DNDEBUG",
            "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1", "-I{cutlass_dir}/include", "-I{cutlass_dir}/tools/util/include",
            "-I{fact_include}", "-Xcompiler=-fPIC", "-c", "{source}", "-o", "{output}"]


def cpp_problem(layout_b="column", numerics="bf16", element="bfloat16", epilogue="none"):
    return {"m": 256, "n": 128, "k": 64, "batch": 1, "a": {"layout": "row", "ld": 64, "batch_stride": 0},
            "b": {"layout": layout_b, "ld": 64, "batch_stride": 0}, "d": {"layout": "row", "ld": 128, "batch_stride": 0},
            "element_in": element, "element_out": element, "numerics": numerics, "epilogue": epilogue, "arch": "sm90"}


def op_entry(cid: str, gencode: str, numerics="bf16", **problem) -> dict:
    return {"name": f"gemm_{cid}", "op": f"fact::gemm_{cid}", "config_id": cid, "summary": "test", "config": {},
            "numerics": numerics, "arch": "sm90", "has_bias": False, "has_residual": False,
            "kernel_source": f"kernels/{cid}.cu", "kernel_object": f"build/{cid}.o", "nvcc_args": nvcc_args(gencode),
            "cutlass_version": "4.2.1", "nvcc_version": "13.0",
            "tuned_for": [{"pattern": "matmul", "problem": cpp_problem(numerics=numerics, **problem), "fact_ms": 0.1}]}


def manifest() -> dict:
    return {"format": "fact-op-library", "version": 1, "namespace": "fact", "library": "libfact_ops.so",
            "kernel_abi_version": kernel_abi.FACT_KERNEL_ABI_VERSION,
            "build": {"ops_source": "ops.cpp", "ops_object": "build/ops.o", "include_dir": "include",
                      "object_dir": "build", "cutlass_include_dirs": ["include", "tools/util/include"],
                      "ops_cxx_flags": ["-std=c++17", "-O3", "-fPIC", "-DNDEBUG", "-I{fact_include}"],
                      "link_libraries": ["c10", "torch", "torch_cpu", "c10_cuda", "torch_cuda", "cudart"]},
            "ops": [op_entry(CONFIG_ID, "-gencode=arch=compute_90a,code=sm_90a"),
                    op_entry(SM80_ID, "-gencode=arch=compute_80,code=sm_80", numerics="3xtf32",
                             element="float32", layout_b="row")]}


@pytest.fixture(autouse=True)
def own_kernel_cache(tmp_path, monkeypatch):
    """Builds here keep their ops.cpp objects in the test's own cache, never in ~/.cache."""
    monkeypatch.setenv("FACT_KERNEL_CACHE", str(tmp_path / "kernel-cache"))


def write_library(tmp_path: Path, obj=None) -> Path:
    (tmp_path / "manifest.json").write_text(json.dumps(manifest() if obj is None else obj))
    return tmp_path


def test_manifest_parses_into_ops(tmp_path):
    lib = olb.load_manifest(write_library(tmp_path))
    assert [op.name for op in lib.ops] == [f"gemm_{CONFIG_ID}", f"gemm_{SM80_ID}"]
    assert lib.library_path == tmp_path / "libfact_ops.so"
    assert lib.ops[1].numerics == "3xtf32"
    assert lib.ops[0].tuned_for[0]["problem"]["m"] == 256


@pytest.mark.parametrize("edit, needle", [
    (lambda m: m.update(format="fact-tune-report"), "format"),
    (lambda m: m.update(version=2), "version"),
    (lambda m: m.update(ops=[]), "ops: empty"),
    (lambda m: m["ops"][0].update(name="gemm_other"), "ops[0].name"),
    (lambda m: m["ops"][0].update(config_id="not-an-id"), "ops[0].config_id"),
    (lambda m: m["ops"][1].update(name=f"gemm_{CONFIG_ID}", config_id=CONFIG_ID), "appears twice"),
    (lambda m: m["ops"][0].update(nvcc_args=["-O3"]), "ops[0].nvcc_args"),
    (lambda m: m["ops"][0].update(kernel_source="../x.cu"), "inside the library folder"),
    (lambda m: m["ops"][0]["tuned_for"][0].pop("problem"), "tuned_for[0].problem"),
    (lambda m: m["build"].pop("link_libraries"), "build.link_libraries"),
])
def test_manifest_errors_name_the_field(tmp_path, edit, needle):
    m = manifest()
    edit(m)
    with pytest.raises(olb.ManifestError, match=re.escape(needle)):
        olb.load_manifest(write_library(tmp_path, m))


def test_missing_or_broken_manifest(tmp_path):
    with pytest.raises(olb.ManifestError, match="fact ops build"):
        olb.load_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("{ nope")
    with pytest.raises(olb.ManifestError, match="not valid JSON"):
        olb.load_manifest(tmp_path)


def cpp_nvcc_flags() -> tuple[list[str], dict[str, str]]:
    """The literal flags of src/realize/nvcc_command.cpp: argv of nvcc_command() and nvcc_gencode()'s two."""
    text = (REPO_ROOT / "src" / "realize" / "nvcc_command.cpp").read_text()
    body = text[text.index("std::vector<std::string> argv = {"):]
    body = body[:body.index("};")]
    flags = [f for f in re.findall(r'"(-[^"]*)"', body) if f not in ("-I",)]
    gencode = re.search(r'arch == Arch::sm90 \? "([^"]+)" : "([^"]+)"', text)
    return flags, {"sm90": gencode.group(1), "sm80": gencode.group(2)}


def test_kernel_command_matches_nvcc_command_cpp(tmp_path):
    lib = olb.load_manifest(write_library(tmp_path))
    flags, gencode = cpp_nvcc_flags()
    assert "-std=c++17" in flags and "--expt-relaxed-constexpr" in flags and "-O3" in flags
    cutlass = Path("/opt/cutlass")
    for op, arch in zip(lib.ops, ("sm90", "sm80")):
        cmd = olb.kernel_command(lib, op, cutlass, "/usr/bin/nvcc")
        assert cmd[0] == "/usr/bin/nvcc"
        for f in flags:
            assert f in cmd, f"{f} of nvcc_command.cpp is missing from {cmd}"
        assert gencode[arch] in cmd
        assert "-I/opt/cutlass/include" in cmd and "-I/opt/cutlass/tools/util/include" in cmd
        assert f"-I{tmp_path / 'include'}" in cmd
        assert cmd[-3:] == [str(tmp_path / op.kernel_source), "-o", str(tmp_path / op.kernel_object)]
        assert "-c" in cmd and not any("{" in a for a in cmd)


def test_ops_and_link_commands(tmp_path):
    lib = olb.load_manifest(write_library(tmp_path))
    flags = olb.TorchBuildFlags(include_dirs=("/t/include", "/cuda/include"), library_dirs=("/t/lib",), cxx11_abi=True)
    cmd = olb.ops_command(lib, flags, "g++")
    assert cmd[0] == "g++" and "-std=c++17" in cmd and "-fPIC" in cmd
    assert "-I/t/include" in cmd and "-I/cuda/include" in cmd and "-D_GLIBCXX_USE_CXX11_ABI=1" in cmd
    assert f"-I{tmp_path / 'include'}" in cmd
    assert cmd[-4:] == ["-c", str(tmp_path / "ops.cpp"), "-o", str(tmp_path / "build/ops.o")]
    link = olb.link_command(lib, flags, "g++")
    assert link[:4] == ["g++", "-shared", "-o", str(tmp_path / "libfact_ops.so")]
    for op in lib.ops:
        assert str(tmp_path / op.kernel_object) in link
    assert "-ltorch_cuda" in link and "-lcudart" in link and "-Wl,-rpath,/t/lib" in link


# Winners of the normalization, attention and rope families as `fact tune` reports them (the MiniGPT shapes in
# tf32; rope: the Llama-3 block's q in bf16).
NORM_CONFIG = {"family": "normalization", "kind": "layer_norm", "element": "float32", "arch": "sm90",
               "has_weight": True, "has_bias": True, "has_residual": False, "store_sum": False,
               "threads_per_row": 128, "rows_per_cta": 1, "vector_elems": 4, "vectors_per_thread": 2}
NORM_PROBLEM = {"kind": "layer_norm", "rows": 65536, "cols": 768, "x_row_stride": 768, "residual_row_stride": 0,
                "has_weight": True, "has_bias": True, "has_residual": False, "store_sum": False, "eps": 1e-5,
                "element": "float32", "numerics": "fp32", "arch": "sm90"}
ATTENTION_CONFIG = {"family": "attention", "arch": "sm90", "element": "float32", "numerics": "tf32",
                    "head_dim": 96, "block_m": 128, "block_n": 64, "warps": 4}
ATTENTION_PROBLEM = {"batch": 128, "heads": 8, "heads_kv": 8, "seq_q": 512, "seq_k": 512, "head_dim": 96,
                     "causal": True, "scale": 96 ** -0.5, "q_strides": [1179648, 96, 2304],
                     "k_strides": [1179648, 96, 2304], "v_strides": [1179648, 96, 2304], "element": "float32",
                     "numerics": "tf32", "arch": "sm90"}
ROPE_CONFIG = {"family": "rope", "kind": "half_split", "element": "bfloat16", "arch": "sm90", "head_dim": 128,
               "threads_per_cta": 256, "vector_elems": 8, "items_per_thread": 2}
ROPE_PROBLEM = {"batch": 2, "heads": 32, "seq": 2048, "head_dim": 128, "x_strides": [8388608, 128, 4096],
                "cos_strides": [0, 0, 128], "sin_strides": [0, 0, 128], "out_strides": [8388608, 128, 4096],
                "element": "bfloat16", "numerics": "bf16", "arch": "sm90"}


def test_fact_ops_build_writes_family_ops_the_builder_reads(tmp_path):
    """`fact ops build` on a report with a LayerNorm, an attention and a rope winner: one folder whose manifest
    the builder parses (family ops named by their config id), with each family's kernel and wrapper."""
    fact_bin = REPO_ROOT / "build" / "fact"
    if not fact_bin.is_file():
        pytest.skip(f"fact binary not built at {fact_bin}")
    rows = [{"pattern": "layer_norm", "anchor": "layer_norm", "family": "normalization", "status": "tuned",
             "config": NORM_CONFIG, "problem": NORM_PROBLEM, "winner": "norm_x", "fact_ms": 0.1, "baseline_ms": 0.2},
            {"pattern": "sdpa_attention_manual", "anchor": "matmul_1", "family": "attention", "status": "tuned",
             "config": ATTENTION_CONFIG, "problem": ATTENTION_PROBLEM, "winner": "attn_x", "fact_ms": 1.0,
             "baseline_ms": 4.0},
            {"pattern": "rope", "anchor": "add_1", "family": "rope", "status": "tuned", "config": ROPE_CONFIG,
             "problem": ROPE_PROBLEM, "winner": "rope_x", "fact_ms": 0.05, "baseline_ms": 0.3}]
    report = tmp_path / "tune.json"
    report.write_text(json.dumps({"format": "fact-tune-report", "version": 1, "rows": rows}))
    out = tmp_path / "ops"
    r = subprocess.run([str(fact_bin), "ops", "build", str(report), "--out", str(out)], capture_output=True,
                       text=True, cwd=REPO_ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    lib = olb.load_manifest(out)
    assert [op.family for op in lib.ops] == ["normalization", "attention", "rope"]
    norm, attn, rope = lib.ops
    assert rope.name.startswith("rope_") and rope.numerics == "bf16" and "sm90 rope bfloat16 d128" in r.stdout
    assert norm.name.startswith("norm_") and norm.name == norm.config_id
    assert attn.name.startswith("attn_") and attn.numerics == "tf32" and norm.numerics == "fp32"
    assert f"fact::{attn.name}" in r.stdout and "sm90 attention tf32 d96" in r.stdout
    ops_cpp = (out / "ops.cpp").read_text()
    for op in lib.ops:
        assert f"fact_{op.config_id}_run" in (out / op.kernel_source).read_text()
        assert f'm.impl("{op.name}", &fact_ops::{op.name}_cuda)' in ops_cpp
        cmd = olb.kernel_command(lib, op, Path("/opt/cutlass"), "nvcc")
        assert "-gencode=arch=compute_90a,code=sm_90a" in cmd and "-c" in cmd and not any("{" in a for a in cmd)
    assert f'define_once(m, "{rope.name}", "{rope.name}(Tensor x, Tensor cos, Tensor sin) -> Tensor")' in ops_cpp
    assert str(out / attn.kernel_object) in olb.link_command(lib, olb.TorchBuildFlags((), (), True), "g++")


@pytest.mark.parametrize("edit, needle", [
    (lambda o: o.update(family="convolution"), "ops[0].family"),
    (lambda o: o.update(family="normalization"), "ops[0].name"),  # a family op is named by its config id
])
def test_family_manifest_errors_name_the_field(tmp_path, edit, needle):
    m = manifest()
    edit(m["ops"][0])
    with pytest.raises(olb.ManifestError, match=re.escape(needle)):
        olb.load_manifest(write_library(tmp_path, m))


def rowwise_op(entry: str) -> dict:
    """A registered row-wise kernel's op as src/realize/op_library.cpp's family_manifest_op writes it."""
    cid = f"rowwise_{entry}"
    return {"name": cid, "op": f"fact::{cid}", "family": "rowwise", "schema": f"{cid}(Tensor in0) -> Tensor",
            "config_id": cid, "summary": f"rowwise {entry}", "config": {"entry": entry, "cols": 256},
            "numerics": "fp32", "arch": "sm90", "element": "unknown", "kernel_source": f"kernels/{cid}.cu",
            "kernel_object": f"build/{cid}.o", "nvcc_args": nvcc_args("-gencode=arch=compute_90a,code=sm_90a"),
            "tuned_for": [{"pattern": entry, "problem": {"entry": entry, "rows": 64, "cols": 256,
                                                         "dtype": "float32", "numerics": "fp32"}}]}


def test_manifest_takes_a_rowwise_op_and_every_family_of_the_data(tmp_path):
    """The builder's families are the data files' (family_cases), so an agent-registered row-wise winner builds."""
    assert olb.FAMILIES == family_cases.FAMILIES and "rowwise" in olb.FAMILIES
    m = manifest()
    m["ops"].append(rowwise_op("swish_absmax_rows"))
    lib = olb.load_manifest(write_library(tmp_path, m))
    op = lib.ops[-1]
    assert (op.family, op.name, op.config_id) == ("rowwise", "rowwise_swish_absmax_rows", "rowwise_swish_absmax_rows")
    assert str(tmp_path / op.kernel_object) in olb.link_command(lib, olb.TorchBuildFlags((), (), True), "g++")
    m["ops"][-1]["name"] = "gemm_rowwise_swish_absmax_rows"  # a family op is named by its config id
    with pytest.raises(olb.ManifestError, match=re.escape("ops[2].name")):
        olb.load_manifest(write_library(tmp_path, m))


def test_trim_diagnostics_keeps_error_lines():
    noise = [f"  detected during instantiation of x<{i}>" for i in range(200)]
    text = "\n".join(noise[:50] + ["k.cu(12): error: identifier \"Foo\" is undefined"] + noise[50:])
    out = olb.trim_diagnostics(text)
    assert 'error: identifier "Foo"' in out
    assert len(out.splitlines()) <= 31


def test_step_is_skipped_when_up_to_date(tmp_path):
    out = tmp_path / "o.txt"
    src = tmp_path / "s.txt"
    src.write_text("x")
    step = lambda: olb.Step("t", ["sh", "-c", f"cp {src} {out}"], out, (src,))  # noqa: E731
    assert olb.run_step(step()).status == "compiled"
    assert olb.run_step(step()).status == "up_to_date"
    failed = olb.run_step(olb.Step("bad", ["sh", "-c", "echo 'x.cu: error: boom' >&2; exit 1"], tmp_path / "b", ()))
    assert failed.status == "failed" and "boom" in failed.diagnostics


def test_builder_exit_paths(tmp_path, monkeypatch, capsys):
    assert olb.main([str(tmp_path)]) == olb.EXIT_BAD_INPUT
    write_library(tmp_path)

    def no_cuda_torch():
        raise olb.NeedsCudaTorch("torch 2.11.0+cpu is a CPU-only build")

    monkeypatch.setattr(olb, "torch_build_flags", no_cuda_torch)
    assert olb.main([str(tmp_path)]) == olb.EXIT_NEEDS_CUDA_TORCH
    assert "needs the GPU machine's torch" in capsys.readouterr().err
    monkeypatch.setattr(olb, "torch_build_flags", lambda: olb.TorchBuildFlags((), (), True))
    monkeypatch.setenv("CUTLASS_DIR", str(tmp_path / "no-cutlass"))
    assert olb.main([str(tmp_path)]) == olb.EXIT_BAD_INPUT
    assert "CUTLASS_DIR" in capsys.readouterr().err


def test_problem_from_cpp_problem_json():
    p = op_check.problem_of({"problem": cpp_problem()}, "t")
    assert (p.m, p.n, p.k, p.layout_a, p.layout_b, p.dtype, p.numerics) == (256, 128, 64, "row", "col", "bfloat16", "bf16")
    with pytest.raises(op_check.RequestError, match="numerics"):
        op_check.problem_of({"problem": cpp_problem(numerics="tf32")}, "t")


def test_op_check_exit_paths(tmp_path):
    out = tmp_path / "result.json"
    assert op_check.main([str(tmp_path), "-o", str(out)]) == op_check.EXIT_BAD_INPUT
    assert json.loads(out.read_text())["status"] == "bad_input"
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present; the no-GPU path cannot be exercised")
    write_library(tmp_path)
    assert op_check.main([str(tmp_path), "-o", str(out)]) == op_check.EXIT_NO_GPU
    assert json.loads(out.read_text())["status"] == "needs_gpu"


def stub_compiler(tmp_path: Path) -> tuple[Path, Path]:
    """A compiler that logs its arguments and writes its -o file: stands in for nvcc and c++."""
    calls, stub = tmp_path / "calls.log", tmp_path / "stub-compiler"
    stub.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n'
                    'out=; prev=; for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done\necho built > "$out"\n')
    stub.chmod(0o755)
    return stub, calls


def test_prebuilt_kernel_objects_are_linked_not_compiled_again(tmp_path, monkeypatch):
    """One build: a kernel whose object `fact` took from its kernel cache is linked from there; a listed object
    compiled from another source is not trusted, and that kernel is compiled."""
    (tmp_path / "lib" / "kernels").mkdir(parents=True)
    lib_dir = write_library(tmp_path / "lib")
    for cid in (CONFIG_ID, SM80_ID):
        (lib_dir / "kernels" / f"{cid}.cu").write_text(f"// kernel {cid}\n")
    (lib_dir / "ops.cpp").write_text("// ops\n")
    (lib_dir / "include").mkdir()
    (lib_dir / "include" / "kernel_abi.h").write_text("")
    cached = tmp_path / "cache" / "kernel.o"
    cached.parent.mkdir()
    cached.write_text("object")

    def sha(cid):
        return hashlib.sha256((lib_dir / "kernels" / f"{cid}.cu").read_bytes()).hexdigest()

    def listing(sm80_sha):
        (lib_dir / olb.PREBUILT_FILE).write_text(json.dumps({"format": "fact-prebuilt-objects", "version": 1, "objects": {
            CONFIG_ID: {"object": str(cached), "source_sha256": sha(CONFIG_ID)},
            SM80_ID: {"object": str(cached), "source_sha256": sm80_sha}}}))

    stub, calls = stub_compiler(tmp_path)
    monkeypatch.setenv("FACT_NVCC", str(stub))
    monkeypatch.setenv("CXX", str(stub))
    cutlass = tmp_path / "cutlass"
    (cutlass / "include" / "cutlass").mkdir(parents=True)
    (cutlass / "include" / "cutlass" / "cutlass.h").write_text("")
    monkeypatch.setenv("CUTLASS_DIR", str(cutlass))
    monkeypatch.setattr(olb, "torch_build_flags", lambda: olb.TorchBuildFlags((), (), True))
    monkeypatch.setattr(olb, "verify_loads", lambda lib: [])

    listing("0" * 64)  # SM80's object was compiled from another source
    log = []
    result = olb.build(olb.load_manifest(lib_dir), 2, log=log.append)
    assert result["status"] == "ok", result["message"]
    steps = {s["name"]: s for s in result["steps"]}
    assert steps[f"kernel {CONFIG_ID}"]["status"] == "prebuilt" and steps[f"kernel {CONFIG_ID}"]["output"] == str(cached)
    assert steps[f"kernel {SM80_ID}"]["status"] == "compiled"
    lines = calls.read_text().splitlines()
    assert not any(f"{CONFIG_ID}.cu" in line for line in lines)
    assert sum(f"{SM80_ID}.cu" in line for line in lines) == 1 and sum("ops.cpp" in line for line in lines) == 1
    link = next(line for line in lines if "-shared" in line)
    assert str(cached) in link and f"build/{CONFIG_ID}.o" not in link and f"build/{SM80_ID}.o" in link
    assert any("compiled from another source" in line for line in log)

    # Every kernel prebuilt: only ops.cpp is compiled, and neither CUTLASS nor nvcc is needed.
    listing(sha(SM80_ID))
    calls.unlink()
    monkeypatch.setenv("CUTLASS_DIR", str(tmp_path / "no-cutlass"))
    result = olb.build(olb.load_manifest(lib_dir), 2, log=log.append)
    assert result["status"] == "ok" and result["cutlass_dir"] is None
    assert [s["status"] for s in result["steps"] if s["name"].startswith("kernel ")] == ["prebuilt", "prebuilt"]
    assert not any(".cu" in line for line in calls.read_text().splitlines())


def prebuilt_library(d: Path, obj: Path, ops_text: str = "// ops\n"):
    """A library folder whose every kernel is listed as prebuilt from `obj` (its sources match): builds compile
    only ops.cpp and link."""
    (d / "kernels").mkdir(parents=True)
    write_library(d)
    for cid in (CONFIG_ID, SM80_ID):
        (d / "kernels" / f"{cid}.cu").write_text(f"// kernel {cid}\n")
    (d / "ops.cpp").write_text(ops_text)
    (d / "include").mkdir()
    (d / "include" / "kernel_abi.h").write_text("// abi\n")
    objects = {cid: {"object": str(obj), "source_sha256": hashlib.sha256(
        (d / "kernels" / f"{cid}.cu").read_bytes()).hexdigest()} for cid in (CONFIG_ID, SM80_ID)}
    (d / olb.PREBUILT_FILE).write_text(json.dumps({"format": "fact-prebuilt-objects", "version": 1,
                                                  "objects": objects}))
    return olb.load_manifest(d)


def test_ops_cpp_object_comes_from_the_content_cache_in_another_folder(tmp_path, monkeypatch):
    """The same winners give the same ops.cpp: a second library folder links the cached object (no compile); an
    ops.cpp that differs is compiled."""
    stub, calls = stub_compiler(tmp_path)
    monkeypatch.setenv("CXX", str(stub))
    monkeypatch.setattr(olb, "torch_build_flags", lambda: olb.TorchBuildFlags((), (), True))
    monkeypatch.setattr(olb, "verify_loads", lambda lib: [])
    cached = tmp_path / "kernel.o"
    cached.write_text("object")

    def folder(name, ops_text):
        return prebuilt_library(tmp_path / name, cached, ops_text)

    def ops_status(lib):
        result = olb.build(lib, 2, log=lambda line: None)
        assert result["status"] == "ok", result["message"]
        return next(s["status"] for s in result["steps"] if s["name"] == "ops.cpp")

    assert ops_status(folder("first", "// ops\n")) == "compiled"
    assert ops_status(folder("second", "// ops\n")) == "cached"
    assert (tmp_path / "second" / "build").exists()
    assert sum("ops.cpp" in line for line in calls.read_text().splitlines()) == 1
    assert ops_status(folder("third", "// other ops\n")) == "compiled"


def test_linked_library_comes_from_the_cache_and_its_load_check_is_left_to_the_e2e_check(tmp_path, monkeypatch):
    """A second folder with the same objects and link command copies the library kept after the first passed its
    load check (no link, no torch import); a library that failed its load check is not kept; other objects link."""
    stub, calls = stub_compiler(tmp_path)
    monkeypatch.setenv("CXX", str(stub))
    monkeypatch.setattr(olb, "torch_build_flags", lambda: olb.TorchBuildFlags((), (), True))
    loads, missing = [], []
    monkeypatch.setattr(olb, "verify_loads", lambda lib: loads.append(lib.dir.name) or list(missing))
    kernel = tmp_path / "kernel.o"

    def folder(name, kernel_bytes="object"):
        kernel.write_text(kernel_bytes)
        return olb.build(prebuilt_library(tmp_path / name, kernel), 2, log=lambda line: None)

    def link_status(result):
        return next(s["status"] for s in result["steps"] if s["name"] == "link")

    missing.append(f"gemm_{CONFIG_ID}")
    failed = folder("broken")
    assert failed["status"] == "failed" and link_status(failed) == "compiled" and loads == ["broken"]
    missing.clear()
    first = folder("first")  # the broken library was not kept: linked and load-checked again
    assert first["status"] == "ok" and link_status(first) == "compiled" and first["load_check"] == "passed"
    second = folder("second")
    assert second["status"] == "ok" and link_status(second) == "cached", second
    assert "end-to-end check" in second["load_check"] and loads == ["broken", "first"]
    assert (tmp_path / "second" / "libfact_ops.so").read_bytes() == (tmp_path / "first" / "libfact_ops.so").read_bytes()
    assert sum("-shared" in line for line in calls.read_text().splitlines()) == 2
    other = folder("other", kernel_bytes="another object")  # same command, other object contents
    assert link_status(other) == "compiled" and loads[-1] == "other"


def test_torch_build_flags_are_kept_by_the_torch_install(tmp_path, monkeypatch):
    """Asked of torch once per install (version, folder, CUDA); a warm build reads them without importing torch."""
    asked = []
    monkeypatch.setattr(olb, "torch_build_flags_from_torch",
                        lambda: asked.append(1) or olb.TorchBuildFlags(("/t/include",), ("/t/lib",), False))
    monkeypatch.setattr(olb, "torch_install_key", lambda: "torch-a")
    assert olb.torch_build_flags() == olb.TorchBuildFlags(("/t/include",), ("/t/lib",), False)
    assert olb.torch_build_flags() == olb.TorchBuildFlags(("/t/include",), ("/t/lib",), False) and len(asked) == 1
    monkeypatch.setattr(olb, "torch_install_key", lambda: "torch-b")  # another install asks again
    olb.torch_build_flags()
    assert len(asked) == 2

    def no_cuda_torch():
        raise olb.NeedsCudaTorch("torch 2.11.0+cpu is a CPU-only build")
    monkeypatch.setattr(olb, "torch_build_flags_from_torch", no_cuda_torch)
    monkeypatch.setattr(olb, "torch_install_key", lambda: "torch-cpu")
    for _ in range(2):  # a CPU-only torch is never kept as buildable
        with pytest.raises(olb.NeedsCudaTorch):
            olb.torch_build_flags()

    # The key itself is read without importing torch, and changes with where CUDA is found.
    script = ("import sys, os; from fact.realize import op_library_build as o; a = o.torch_install_key(); "
              "os.environ['CUDA_HOME'] = '/elsewhere'; b = o.torch_install_key(); "
              "assert 'torch' not in sys.modules; print(a is None or a != b)")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "python")})
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr
