"""Builds an op library folder (written by `fact ops build`) into ONE DIR/libfact_ops.so.

    python -m fact.realize.op_library_build DIR [--jobs N]

Reads DIR/manifest.json (format "fact-op-library", version 1), compiles every kernels/<id>.cu (of every
kernel family alike) with nvcc using the manifest's command line (it is src/realize/nvcc_command.cpp's,
with machine paths as placeholders) and ops.cpp with this torch's include paths and C++ ABI flag, all in
parallel, links them into DIR/libfact_ops.so, then loads it with torch.ops.load_library and checks that
every op of the manifest is in torch.ops.fact. Writes DIR/build_result.json.

A kernel listed in DIR/prebuilt_objects.json (written by `fact ops build --compile`: the object the tuner
compiled into fact's kernel cache) is linked from there instead of compiled again, if that object exists and
was compiled from exactly this folder's kernels/<id>.cu (SHA-256); otherwise it is compiled as above.

Warm builds import no torch: its build flags are kept in the kernel cache by torch's distribution (version and
folder), ops.cpp's object by its content, and the linked library by the link command and its objects' contents; a
library copied from there passed the load check when it was kept, and the end-to-end check loads it again.

Exit status: 0 built and loaded; 1 a compile, link or load failed; 2 bad input (manifest, CUTLASS or
nvcc not found); 3 this Python has no CUDA build of torch (build on the GPU machine).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .family_cases import FAMILIES
from .kernel_abi import FACT_KERNEL_ABI_VERSION, KERNEL_ID_PATTERN

MANIFEST_FORMAT = "fact-op-library"
MANIFEST_VERSION = 1
PLACEHOLDERS = ("{cutlass_dir}", "{fact_include}", "{source}", "{output}")
PREBUILT_FILE = "prebuilt_objects.json"
PREBUILT_FORMAT = "fact-prebuilt-objects"

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_NEEDS_CUDA_TORCH = 0, 1, 2, 3


class ManifestError(Exception):
    """manifest.json is missing or malformed; the message names the field and the fix."""


class BuildInputError(Exception):
    """Something the build needs (CUTLASS, nvcc) is not on this machine; the message says how to provide it."""


class NeedsCudaTorch(Exception):
    """This Python's torch is missing or is a CPU-only build."""


@dataclass(frozen=True)
class OpSpec:
    name: str                 # the op in torch.ops.fact: gemm_<id>, or a family's config id (norm_<h>, attn_<h>)
    config_id: str
    summary: str
    numerics: str
    has_bias: bool
    has_residual: bool
    kernel_source: str        # relative to the library folder
    kernel_object: str
    nvcc_args: tuple[str, ...]
    tuned_for: tuple[dict, ...]
    config: dict = field(default_factory=dict)
    family: str = "gemm"      # one of family_cases.FAMILIES


@dataclass(frozen=True)
class OpLibrary:
    dir: Path
    library: str              # file name of the shared library, in dir
    ops: tuple[OpSpec, ...]
    build: dict

    @property
    def library_path(self) -> Path:
        return self.dir / self.library

    def path(self, relative: str) -> Path:
        return self.dir / relative


def _field(obj: dict, key: str, kind, where: str):
    if key not in obj:
        raise ManifestError(f"{where}.{key}: missing")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ManifestError(f"{where}.{key}: {value!r} is not a {getattr(kind, '__name__', kind)}")
    return value


def _relative_path(value: str, where: str) -> str:
    p = Path(value)
    if p.is_absolute() or ".." in p.parts:
        raise ManifestError(f"{where}: {value!r} must be a path inside the library folder")
    return value


def parse_manifest(obj, directory: Path, where: str = "manifest") -> OpLibrary:
    fix = "; write the folder again with `fact ops build REPORT.json --out DIR`"
    if not isinstance(obj, dict):
        raise ManifestError(f"{where}: not a JSON object{fix}")
    if obj.get("format") != MANIFEST_FORMAT:
        raise ManifestError(f"{where}.format: {obj.get('format')!r}, expected {MANIFEST_FORMAT!r}{fix}")
    if obj.get("version") != MANIFEST_VERSION:
        raise ManifestError(f"{where}.version: {obj.get('version')!r}; this builder reads version "
                            f"{MANIFEST_VERSION}{fix}")
    abi = obj.get("kernel_abi_version", FACT_KERNEL_ABI_VERSION)
    if abi != FACT_KERNEL_ABI_VERSION:
        raise ManifestError(f"{where}.kernel_abi_version: {abi!r}, but kernel_abi.py is version "
                            f"{FACT_KERNEL_ABI_VERSION}{fix}")
    library = _field(obj, "library", str, where)
    build = _field(obj, "build", dict, where)
    for key in ("ops_source", "ops_object", "include_dir", "object_dir"):
        _relative_path(_field(build, key, str, f"{where}.build"), f"{where}.build.{key}")
    _field(build, "ops_cxx_flags", list, f"{where}.build")
    _field(build, "link_libraries", list, f"{where}.build")
    ops_json = _field(obj, "ops", list, where)
    if not ops_json:
        raise ManifestError(f"{where}.ops: empty; an op library needs at least one op{fix}")
    ops, seen = [], set()
    for i, o in enumerate(ops_json):
        w = f"{where}.ops[{i}]"
        if not isinstance(o, dict):
            raise ManifestError(f"{w}: not an object")
        cid = _field(o, "config_id", str, w)
        if not KERNEL_ID_PATTERN.match(cid):
            raise ManifestError(f"{w}.config_id: {cid!r} is not a C identifier fragment ([A-Za-z0-9_]+)")
        family = o.get("family", "gemm")
        if family not in FAMILIES:
            raise ManifestError(f"{w}.family: {family!r} is not one of {', '.join(FAMILIES)}")
        name = _field(o, "name", str, w)
        # As OpLibraryEntry::op_name(): GEMM ops are gemm_<id>; another family's config id already names its
        # family (norm_..., attn_..., rope_..., rowwise_...).
        expected = f"gemm_{cid}" if family == "gemm" else cid
        if name != expected:
            raise ManifestError(f"{w}.name: {name!r}, expected {expected!r} (ops.cpp defines that name)")
        if name in seen:
            raise ManifestError(f"{w}.name: {name!r} appears twice")
        seen.add(name)
        args = _field(o, "nvcc_args", list, w)
        if not all(isinstance(a, str) for a in args) or "{source}" not in args or "{output}" not in args:
            raise ManifestError(f"{w}.nvcc_args: must be strings naming {{source}} and {{output}}")
        tuned = _field(o, "tuned_for", list, w)
        for j, t in enumerate(tuned):
            if not isinstance(t, dict) or not isinstance(t.get("problem"), dict):
                raise ManifestError(f"{w}.tuned_for[{j}].problem: missing (the problem JSON the op won)")
        ops.append(OpSpec(
            name=name, config_id=cid, summary=o.get("summary", ""), family=family,
            numerics=_field(o, "numerics", str, w),
            has_bias=bool(o.get("has_bias", False)), has_residual=bool(o.get("has_residual", False)),
            kernel_source=_relative_path(_field(o, "kernel_source", str, w), f"{w}.kernel_source"),
            kernel_object=_relative_path(_field(o, "kernel_object", str, w), f"{w}.kernel_object"),
            nvcc_args=tuple(args), tuned_for=tuple(tuned), config=o.get("config") or {}))
    return OpLibrary(dir=Path(directory), library=library, ops=tuple(ops), build=build)


def load_manifest(directory: str | Path) -> OpLibrary:
    directory = Path(directory)
    path = directory / "manifest.json"
    try:
        text = path.read_text()
    except OSError as e:
        raise ManifestError(f"{path}: cannot read ({e.strerror}); is {directory} a folder written by "
                            f"`fact ops build`?") from e
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ManifestError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from e
    try:
        return parse_manifest(obj, directory)
    except ManifestError as e:
        raise ManifestError(f"{path}: {e}") from e


# --- The machine's tools ------------------------------------------------------------------------

def nvcc_exe() -> str:
    """As src/realize/nvcc_command.cpp: $FACT_NVCC, $CUDA_HOME/bin/nvcc, /usr/local/cuda/bin/nvcc, nvcc."""
    if os.environ.get("FACT_NVCC"):
        return os.environ["FACT_NVCC"]
    home = os.environ.get("CUDA_HOME")
    if home and (Path(home) / "bin" / "nvcc").exists():
        return str(Path(home) / "bin" / "nvcc")
    if Path("/usr/local/cuda/bin/nvcc").exists():
        return "/usr/local/cuda/bin/nvcc"
    return "nvcc"


def cxx_exe() -> str:
    return os.environ.get("CXX") or "c++"


def find_cutlass_dir() -> Path:
    """As fact::cutlass_dir(): $CUTLASS_DIR, else the installed cutlass_library wheel's source/."""
    env = os.environ.get("CUTLASS_DIR")
    if env:
        if not (Path(env) / "include" / "cutlass" / "cutlass.h").exists():
            raise BuildInputError(f"CUTLASS_DIR={env} has no include/cutlass/cutlass.h; point it at a CUTLASS "
                                  f"source root")
        return Path(env)
    try:
        import cutlass_library
    except ImportError:
        raise BuildInputError("cannot find CUTLASS: set CUTLASS_DIR, or pip install the pinned nvidia-cutlass "
                              "wheel (python/requirements.txt) into this Python") from None
    root = Path(cutlass_library.__file__).parent / "source"
    if not (root / "include" / "cutlass" / "cutlass.h").exists():
        raise BuildInputError(f"{root}: the cutlass_library wheel has no include/cutlass/cutlass.h; set CUTLASS_DIR")
    return root


@dataclass(frozen=True)
class TorchBuildFlags:
    include_dirs: tuple[str, ...]
    library_dirs: tuple[str, ...]
    cxx11_abi: bool


def torch_install_key() -> str | None:
    """What decides this torch's build flags, read without importing torch (seconds): its distribution's version and
    folder, this Python, and where cpp_extension finds CUDA ($CUDA_HOME, $CUDA_PATH, nvcc on PATH). None when torch
    is not installed."""
    import importlib.metadata
    try:
        dist = importlib.metadata.distribution("torch")
    except importlib.metadata.PackageNotFoundError:
        return None
    parts = (dist.version, str(dist.locate_file("torch")), sys.executable, os.environ.get("CUDA_HOME", ""),
             os.environ.get("CUDA_PATH", ""), shutil.which("nvcc") or "")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def torch_build_flags() -> TorchBuildFlags:
    """Include/library dirs and the C++ ABI of this Python's torch; raises NeedsCudaTorch without a CUDA build.
    Kept in the kernel cache by torch_install_key(), so a warm build does not import torch."""
    key = torch_install_key()
    entry = kernel_cache_dir() / "torch_flags" / f"{key}.json" if key else None
    if entry is not None and entry.is_file():
        try:
            kept = json.loads(entry.read_text())
            return TorchBuildFlags(include_dirs=tuple(kept["include_dirs"]), library_dirs=tuple(kept["library_dirs"]),
                                   cxx11_abi=bool(kept["cxx11_abi"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # an unreadable entry is asked of torch again and rewritten
    flags = torch_build_flags_from_torch()
    if entry is not None:
        write_cache_file(entry, json.dumps({"include_dirs": flags.include_dirs, "library_dirs": flags.library_dirs,
                                            "cxx11_abi": flags.cxx11_abi}).encode())
    return flags


def torch_build_flags_from_torch() -> TorchBuildFlags:
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError as e:
        raise NeedsCudaTorch(f"torch cannot be imported ({e})") from e
    if not torch.version.cuda:
        raise NeedsCudaTorch(f"torch {torch.__version__} is a CPU-only build")
    return TorchBuildFlags(include_dirs=tuple(cpp_extension.include_paths("cuda")),
                           library_dirs=tuple(cpp_extension.library_paths("cuda")),
                           cxx11_abi=bool(torch._C._GLIBCXX_USE_CXX11_ABI))


# --- Command lines ------------------------------------------------------------------------------

def substitute(args, values: dict[str, str]) -> list[str]:
    out = []
    for a in args:
        for key, value in values.items():
            a = a.replace(key, value)
        out.append(a)
    return out


def kernel_command(lib: OpLibrary, op: OpSpec, cutlass_dir: Path, nvcc: str) -> list[str]:
    values = {"{cutlass_dir}": str(cutlass_dir), "{fact_include}": str(lib.path(lib.build["include_dir"])),
              "{source}": str(lib.path(op.kernel_source)), "{output}": str(lib.path(op.kernel_object))}
    return [nvcc] + substitute(op.nvcc_args, values)


def kernel_ops(lib: OpLibrary) -> list:
    """One op per kernel object: ops whose configs are run-time variants of one kernel share its source and object,
    which is compiled and linked once."""
    seen, out = set(), []
    for op in lib.ops:
        if op.kernel_object not in seen:
            seen.add(op.kernel_object)
            out.append(op)
    return out


def ops_command(lib: OpLibrary, torch_flags: TorchBuildFlags, cxx: str) -> list[str]:
    b = lib.build
    flags = substitute(b["ops_cxx_flags"], {"{fact_include}": str(lib.path(b["include_dir"]))})
    return ([cxx] + flags + [f"-I{d}" for d in torch_flags.include_dirs]
            + [f"-D_GLIBCXX_USE_CXX11_ABI={int(torch_flags.cxx11_abi)}",
               "-c", str(lib.path(b["ops_source"])), "-o", str(lib.path(b["ops_object"]))])


def link_command(lib: OpLibrary, torch_flags: TorchBuildFlags, cxx: str,
                 prebuilt: dict[str, Path] | None = None) -> list[str]:
    prebuilt = prebuilt or {}
    objects = [str(lib.path(lib.build["ops_object"]))] + [str(prebuilt.get(op.config_id, lib.path(op.kernel_object)))
                                                          for op in kernel_ops(lib)]
    return ([cxx, "-shared", "-o", str(lib.library_path)] + objects
            + [f"-L{d}" for d in torch_flags.library_dirs]
            + [f"-Wl,-rpath,{d}" for d in torch_flags.library_dirs]
            + [f"-l{name}" for name in lib.build["link_libraries"]])


def trim_diagnostics(text: str, max_lines: int = 30, max_chars: int = 4000) -> str:
    """The error lines (with the line before each) of a compiler's output; template backtraces dropped."""
    lines = [line for line in text.splitlines() if line.strip()]
    picked: list[str] = []
    for i, line in enumerate(lines):
        if "error" in line.lower() or "undefined reference" in line:
            if i > 0 and lines[i - 1] not in picked and "instantiation of" not in lines[i - 1]:
                picked.append(lines[i - 1])
            picked.append(line)
    picked = picked or lines[-max_lines:]
    shown = "\n".join(picked[:max_lines])
    more = len(picked) - max_lines
    if more > 0:
        shown += f"\n... {more} more line(s)"
    return shown[:max_chars]


# --- Building -----------------------------------------------------------------------------------

@dataclass
class Step:
    name: str                 # "kernel <id>", "ops.cpp" or "link"
    command: list[str]
    output: Path
    inputs: tuple[Path, ...]
    record: Path | None = None  # where the command is kept for the up-to-date check; default output + ".cmd"
    status: str = "pending"   # compiled, up_to_date, cached (ops.cpp or the library from the cache), failed
    seconds: float = 0.0
    diagnostics: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status, "seconds": round(self.seconds, 2),
                "output": str(self.output), "diagnostics": self.diagnostics or None}


def _command_file(step: Step) -> Path:
    return step.record or step.output.with_suffix(step.output.suffix + ".cmd")


def _up_to_date(step: Step) -> bool:
    """Same command as last time and the output newer than every input: skip (re-runs on the device)."""
    cmd = _command_file(step)
    if not step.output.exists() or not cmd.exists() or cmd.read_text() != "\n".join(step.command):
        return False
    built = step.output.stat().st_mtime
    return all(p.exists() and p.stat().st_mtime <= built for p in step.inputs)


def run_step(step: Step) -> Step:
    if _up_to_date(step):
        step.status = "up_to_date"
        return step
    step.output.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        r = subprocess.run(step.command, capture_output=True, text=True)
        ok, text = r.returncode == 0, r.stderr + r.stdout
    except OSError as e:
        ok, text = False, f"cannot run {step.command[0]}: {e.strerror}"
    step.seconds = time.perf_counter() - t0
    if ok:
        step.status = "compiled"
        _command_file(step).write_text("\n".join(step.command))
    else:
        step.status = "failed"
        step.diagnostics = trim_diagnostics(text)
        _command_file(step).unlink(missing_ok=True)
    return step


def kernel_cache_dir() -> Path:
    """As src/realize/kernel_builder.cpp's default_kernel_cache_dir: $FACT_KERNEL_CACHE, else ~/.cache/fact/kernels."""
    return Path(os.environ.get("FACT_KERNEL_CACHE") or Path.home() / ".cache" / "fact" / "kernels")


def ops_cache_key(lib: OpLibrary, step: Step) -> str:
    """ops.cpp's object depends on its text, the ABI header it includes and the command (this torch's include
    paths and flags); the library folder's own path is left out, so every folder with the same ops shares it."""
    h = hashlib.sha256()
    for part in (lib.path(lib.build["ops_source"]).read_bytes(),
                 (lib.path(lib.build["include_dir"]) / "kernel_abi.h").read_bytes(),
                 "\n".join(step.command).replace(str(lib.dir), "{library}").encode()):
        h.update(len(part).to_bytes(8, "little") + part)
    return h.hexdigest()


def write_cache_file(entry: Path, content: bytes) -> None:
    """Atomically (a concurrent build sees the whole file or none); a cache that cannot be written costs the next
    build the work again, nothing else."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_name(f".{entry.name}.{os.getpid()}")
        tmp.write_bytes(content)
        tmp.replace(entry)
    except OSError:
        pass


def run_cached_step(step: Step, key: str, cache: Path) -> Step:
    """run_step, through the content cache: a hit copies the cached object (status cached); a compile stores it.
    Compiling ops.cpp against torch's headers takes seconds, and the same winners give the same ops.cpp."""
    entry = cache / "ops" / key / step.output.name
    if entry.is_file():
        step.output.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(entry, step.output)
        step.status = "cached"
        return step
    run_step(step)
    if step.status == "compiled":
        write_cache_file(entry, step.output.read_bytes())
    return step


def library_cache_entry(lib: OpLibrary, link: Step, cache: Path) -> Path:
    """Where a library linked by exactly this command from objects of exactly these contents is kept (the folder's
    own path left out of the key, so every folder with the same winners shares it)."""
    h = hashlib.sha256()
    command = "\n".join(link.command).replace(str(lib.dir), "{library}").encode()
    h.update(len(command).to_bytes(8, "little") + command)
    for obj in link.inputs:
        h.update(hashlib.sha256(obj.read_bytes()).digest())
    return cache / "libraries" / h.hexdigest() / lib.library


def prebuilt_objects(lib: OpLibrary, log=print) -> dict[str, Path]:
    """Per config id, the kernel object DIR/prebuilt_objects.json names, where it exists and was compiled from
    exactly this folder's kernel source; every other kernel is compiled (and the log says why)."""
    path = lib.dir / PREBUILT_FILE
    try:
        listing = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        log(f"  {PREBUILT_FILE}: unreadable ({e}); every kernel is compiled")
        return {}
    objects = listing.get("objects") if isinstance(listing, dict) else None
    if not isinstance(listing, dict) or listing.get("format") != PREBUILT_FORMAT or not isinstance(objects, dict):
        log(f"  {PREBUILT_FILE}: not a {PREBUILT_FORMAT!r} listing; every kernel is compiled")
        return {}
    found = {}
    for op in lib.ops:
        entry = objects.get(op.config_id)
        if not isinstance(entry, dict):
            continue
        obj = Path(str(entry.get("object", "")))
        try:
            source = hashlib.sha256(lib.path(op.kernel_source).read_bytes()).hexdigest()
        except OSError:
            continue  # the build stops on the missing source with its own message
        if not obj.is_file():
            log(f"  kernel {op.config_id}: the prebuilt object {obj} is gone; compiling it")
        elif entry.get("source_sha256") != source:
            log(f"  kernel {op.config_id}: the prebuilt object was compiled from another source; compiling it")
        else:
            found[op.config_id] = obj
    return found


def plan_steps(lib: OpLibrary, cutlass_dir: Path | None, nvcc: str, torch_flags: TorchBuildFlags,
               cxx: str, prebuilt: dict[str, Path] | None = None) -> tuple[list[Step], Step]:
    """The compiles (kernels without a prebuilt object, and ops.cpp) and the link."""
    prebuilt = prebuilt or {}
    include = lib.path(lib.build["include_dir"]) / "kernel_abi.h"
    compiles = [Step(f"kernel {op.config_id}", kernel_command(lib, op, cutlass_dir, nvcc),
                     lib.path(op.kernel_object), (lib.path(op.kernel_source), include))
                for op in kernel_ops(lib) if op.config_id not in prebuilt]
    compiles.append(Step("ops.cpp", ops_command(lib, torch_flags, cxx), lib.path(lib.build["ops_object"]),
                         (lib.path(lib.build["ops_source"]), include)))
    objects = tuple(s.output for s in compiles) + tuple(prebuilt[op.config_id] for op in kernel_ops(lib)
                                                        if op.config_id in prebuilt)
    link = Step("link", link_command(lib, torch_flags, cxx, prebuilt), lib.library_path, objects,
                record=lib.path(lib.build["object_dir"]) / f"{lib.library}.cmd")
    return compiles, link


def prebuilt_steps(lib: OpLibrary, prebuilt: dict[str, Path]) -> list[Step]:
    """One step per kernel linked from its prebuilt object (nothing run: the record says where it came from)."""
    return [Step(f"kernel {op.config_id}", [], prebuilt[op.config_id], (), status="prebuilt")
            for op in kernel_ops(lib) if op.config_id in prebuilt]


def verify_loads(lib: OpLibrary) -> list[str]:
    """Loads the library into this process; returns the manifest ops missing from torch.ops.fact."""
    import torch
    from .op_library_load import load_op_library
    load_op_library(lib.library_path)
    return [op.name for op in lib.ops if not hasattr(torch.ops.fact, op.name)]


def build(lib: OpLibrary, jobs: int, log=print) -> dict:
    """Compiles, links and load-checks; returns the build_result.json object (status ok or failed)."""
    torch_flags = torch_build_flags()
    prebuilt = prebuilt_objects(lib, log)
    to_compile = [op for op in kernel_ops(lib) if op.config_id not in prebuilt]
    # CUTLASS and nvcc are needed only for kernels that are compiled here.
    cutlass_dir, nvcc = (find_cutlass_dir(), nvcc_exe()) if to_compile else (None, nvcc_exe())
    if to_compile and shutil.which(nvcc) is None:
        raise BuildInputError(f"nvcc not found ({nvcc}); set FACT_NVCC or CUDA_HOME")
    cxx = cxx_exe()
    if shutil.which(cxx) is None:
        raise BuildInputError(f"C++ compiler {cxx!r} not found; set CXX")
    for op in lib.ops:
        if not lib.path(op.kernel_source).is_file():
            raise BuildInputError(f"{lib.path(op.kernel_source)}: missing; write the folder again with `fact ops build`")
    t0 = time.perf_counter()
    compiles, link = plan_steps(lib, cutlass_dir, nvcc, torch_flags, cxx, prebuilt)
    linked = prebuilt_steps(lib, prebuilt)
    log(f"building {lib.library_path}: {len(to_compile)} kernel(s) to compile, {len(linked)} prebuilt, + ops.cpp, "
        f"{jobs} parallel job(s){f', CUTLASS {cutlass_dir}' if cutlass_dir else ''}")
    for step in linked:
        log(f"  {step.name:<22} {step.status:<11} {step.output}")
    cache = kernel_cache_dir()

    def compile_step(step: Step) -> Step:
        return run_cached_step(step, ops_cache_key(lib, step), cache) if step.name == "ops.cpp" else run_step(step)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for step in pool.map(compile_step, compiles):
            log(f"  {step.name:<22} {step.status:<11} {step.seconds:6.1f} s")
    steps = linked + compiles
    failed = [s for s in compiles if s.status == "failed"]
    kept = None
    if not failed:
        kept = library_cache_entry(lib, link, cache)
        if kept.is_file():
            shutil.copyfile(kept, link.output)
            link.status = "cached"
        else:
            run_step(link)
        log(f"  {link.name:<22} {link.status:<11} {link.seconds:6.1f} s")
        steps = linked + compiles + [link]
        failed = [link] if link.status == "failed" else []
    result = {"status": "ok", "library": str(lib.library_path), "nvcc": nvcc,
              "cutlass_dir": str(cutlass_dir) if cutlass_dir else None,  # None: every kernel was prebuilt
              "ops": [op.name for op in lib.ops], "steps": [s.to_json() for s in steps], "message": None}
    if failed:
        by_id = {f"kernel {op.config_id}": op for op in lib.ops}
        lines = []
        for s in failed:
            op = by_id.get(s.name)
            what = f"{s.name} ({op.summary}, {op.kernel_source})" if op else s.name
            lines.append(f"{what} failed:\n{s.diagnostics}")
        result.update(status="failed", message="\n".join(lines))
    elif link.status == "cached":
        # The same command on the same objects gave this library, and it loaded with every op when it was kept;
        # loading it here would import torch (seconds) only to do again what the end-to-end check does.
        result["load_check"] = "left to the end-to-end check (the cached library passed it when it was kept)"
        log(f"  load check: {result['load_check']}")
    else:
        try:
            missing = verify_loads(lib)
        except Exception as e:  # noqa: BLE001 - any load failure is the result
            result.update(status="failed",
                          message=f"torch.ops.load_library({lib.library_path}) failed: {type(e).__name__}: {e}")
        else:
            if missing:
                result.update(status="failed", message=f"loaded, but torch.ops.fact lacks {', '.join(missing)}")
            else:
                result["load_check"] = "passed"
                log(f"  loaded: torch.ops.fact has all {len(lib.ops)} op(s)")
                write_cache_file(kept, lib.library_path.read_bytes())
    result["seconds"] = round(time.perf_counter() - t0, 2)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fact.realize.op_library_build", description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="op library folder written by `fact ops build`")
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 4, help="parallel compiles")
    args = ap.parse_args(argv)
    try:
        lib = load_manifest(args.dir)
    except ManifestError as e:
        print(f"op_library_build: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        result = build(lib, args.jobs)
    except NeedsCudaTorch as e:
        print(f"op_library_build: compiling the op library needs the GPU machine's torch (a CUDA build of "
              f"PyTorch): {e}. Copy {lib.dir} there and run this command again.", file=sys.stderr)
        return EXIT_NEEDS_CUDA_TORCH
    except BuildInputError as e:
        print(f"op_library_build: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    (lib.dir / "build_result.json").write_text(json.dumps(result, indent=1) + "\n")
    if result["status"] != "ok":
        print(f"op_library_build: {result['message']}", file=sys.stderr)
        return EXIT_FAILED
    print(f"built {result['library']} with {len(lib.ops)} op(s) in {result['seconds']} s")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
