"""ctypes mirror of kernel_abi.h, built at import from the data the C++ renders the header from
(src/realize/kernel_abi_header.cpp): data/kernel_abi.json (version, field types, exportable functions) and the
"abi" section of each data/families/<name>.json (struct, fields, constants, functions). Each family's struct is a
ctypes.Structure under its C name (FactGemmArgs, FactNormArgs, ...; args_type(family)) and each constant a module
constant (FACT_ROWWISE_MAX_INPUTS), so a new family adds no code here. tests/python/test_measure.py compiles the
rendered header (`fact ops abi-header`) with gcc and compares sizeof/offsetof of every field with this mirror.
"""
from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from pathlib import Path

from fact.paths import data_dir

from .family_data import FamilyDataError, read_family_files, read_json

# enum FactStatus (templates/abi/kernel_abi.h.in)
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
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ARRAY_TYPE = re.compile(r"^(\w+)\[(\w+)\]$")  # "int64[4]", "const_ptr[FACT_ROWWISE_MAX_INPUTS]"


def status_name(code: int) -> str:
    return STATUS_NAMES.get(code, f"unknown status {code}")


class KernelAbiError(FamilyDataError):
    """data/kernel_abi.json or a family's "abi" section is malformed; the message names the family and field."""


@dataclass(frozen=True)
class FamilyAbi:
    family: str
    struct: type          # the ctypes.Structure, named as in C
    constants: dict       # the #defines before the struct: name -> value
    functions: tuple      # fact_<id>_<function> each kernel of the family exports


@dataclass(frozen=True)
class AbiVocabulary:
    version: int          # FACT_KERNEL_ABI_VERSION
    types: dict           # field type -> ctypes type
    functions: dict       # exportable function -> required (in the export convention's order)


def read_vocabulary(path: Path) -> AbiVocabulary:
    obj = read_json(path, "kernel ABI data")
    try:
        types = {name: getattr(ctypes, t["ctypes"]) for name, t in obj["types"].items() if t["ctypes"].startswith("c_")}
        vocabulary = AbiVocabulary(obj["version"], types, {f["name"]: f["required"] for f in obj["functions"]})
    except (KeyError, TypeError, AttributeError) as e:
        raise KernelAbiError(f"{path}: malformed ({type(e).__name__}: {e}); docs/kernel-abi.md gives the format") from e
    if len(types) != len(obj["types"]):
        raise KernelAbiError(f"{path}: each type's \"ctypes\" must name a ctypes type (c_int64, c_void_p, ...)")
    return vocabulary


def field_type(text, constants: dict, vocabulary: AbiVocabulary, at: str):
    """The ctypes type of a field's "type": a vocabulary type, or T[N] with N a number or a constant."""
    allowed = ", ".join(vocabulary.types)
    if not isinstance(text, str):
        raise KernelAbiError(f"{at}.type: missing; one of {allowed}, or T[N] for an array")
    array = ARRAY_TYPE.match(text)
    base, count = array.groups() if array else (text, None)
    if base not in vocabulary.types:
        raise KernelAbiError(f"{at}.type: \"{base}\" is not a type of the ABI vocabulary ({allowed}; "
                             "data/kernel_abi.json)")
    if count is None:
        return vocabulary.types[base]
    n = int(count) if count.isdigit() else constants.get(count, 0)
    if n < 1:
        raise KernelAbiError(f"{at}.type: array length \"{count}\" is neither a number >= 1 nor a constant of "
                             "abi.constants")
    return vocabulary.types[base] * n


def parse_family_abi(family: str, abi, vocabulary: AbiVocabulary, path="") -> FamilyAbi:
    """The checks of src/realize/kernel_abi_header.cpp that shape the mirror; raises KernelAbiError naming the
    family and the field."""
    where = f"kernel family '{family}' ({path or f'data/families/{family}.json'})"
    if not isinstance(abi, dict):
        raise KernelAbiError(f"{where}: \"abi\" is missing or not an object; it describes the family's argument "
                             "struct (docs/kernel-abi.md)")
    name = abi.get("struct")
    if not isinstance(name, str) or not IDENTIFIER.match(name):
        raise KernelAbiError(f"{where}: abi.struct: missing or not a C identifier (the struct's name, e.g. "
                             "FactGemmArgs)")
    constants = abi.get("constants", {})
    if not isinstance(constants, dict) or not all(
            IDENTIFIER.match(k) and isinstance(v, int) and not isinstance(v, bool) and v >= 1
            for k, v in constants.items()):
        raise KernelAbiError(f"{where}: abi.constants: not an object of C identifiers to integers >= 1")
    fields = abi.get("fields")
    if not isinstance(fields, list) or not fields:
        raise KernelAbiError(f"{where}: abi.fields: missing; the struct's members in memory order")
    members = []
    for i, f in enumerate(fields):
        at = f"{where}: abi.fields[{i}]"
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not IDENTIFIER.match(f["name"]):
            raise KernelAbiError(f"{at}.name: missing or not a C identifier")
        at += f" (\"{f['name']}\")"
        if any(f["name"] == m for m, _ in members):
            raise KernelAbiError(f"{at}: a second field of that name")
        members.append((f["name"], field_type(f.get("type"), constants, vocabulary, at)))
    functions = abi.get("functions")
    if not isinstance(functions, list) or not all(f in vocabulary.functions for f in functions):
        raise KernelAbiError(f"{where}: abi.functions: {functions!r} is not a list of "
                             f"{', '.join(vocabulary.functions)}")
    missing = [f for f, required in vocabulary.functions.items() if required and f not in functions]
    if missing:
        raise KernelAbiError(f"{where}: abi.functions: lacks \"{missing[0]}\", which every kernel exports")
    doc = "\n".join(abi["doc"]) if isinstance(abi.get("doc"), list) else None
    struct = type(name, (ctypes.Structure,), {"_fields_": members, "__doc__": doc, "__module__": __name__})
    return FamilyAbi(family, struct, dict(constants), tuple(f for f in vocabulary.functions if f in functions))


def read_family_abis(vocabulary: AbiVocabulary) -> dict[str, FamilyAbi]:
    """family -> its mirror, in registry order; two families may not declare the same struct or constant."""
    out, declared = {}, {}
    for family, (path, obj) in read_family_files().items():
        abi = out[family] = parse_family_abi(family, obj.get("abi"), vocabulary, path)
        for name in (abi.struct.__name__, *abi.constants):
            if name in declared:
                raise KernelAbiError(f"kernel families '{declared[name]}' and '{family}' both declare {name} in "
                                     "their \"abi\"; rename one")
            declared[name] = family
    return out


VOCABULARY = read_vocabulary(data_dir() / "kernel_abi.json")
FACT_KERNEL_ABI_VERSION = VOCABULARY.version
FAMILY_ABIS = read_family_abis(VOCABULARY)

# Each struct and constant under its C name (FactGemmArgs, FACT_ROWWISE_MAX_INPUTS, ...), as the cases import them.
for _abi in FAMILY_ABIS.values():
    for _name, _value in ((_abi.struct.__name__, _abi.struct), *_abi.constants.items()):
        if _name in globals():
            raise KernelAbiError(f"kernel family '{_abi.family}': abi declares {_name}, a name kernel_abi.py has")
        globals()[_name] = _value


def args_type(family: str) -> type:
    """The family's argument struct (a ctypes.Structure)."""
    if family not in FAMILY_ABIS:
        raise ValueError(f"{family!r} is not one of {', '.join(FAMILY_ABIS)}")
    return FAMILY_ABIS[family].struct


def has_workspace(family: str) -> bool:
    """Whether the family's kernels export workspace_bytes (and take a workspace)."""
    args_type(family)
    return "workspace_bytes" in FAMILY_ABIS[family].functions


class KernelLoadError(Exception):
    """The library could not be opened or lacks one of the four exported functions."""


class KernelLibrary:
    """One candidate: a shared library exporting fact_<id>_{can_implement,workspace_bytes,run,describe}.

    args_type is the family's argument struct (default GEMM's); families without a workspace (normalization,
    attention, rope) export no workspace_bytes, and workspace_bytes() then returns 0."""

    def __init__(self, path: str | Path, kernel_id: str, args_type=None, has_workspace: bool = True,
                 arguments: dict | None = None):
        if not KERNEL_ID_PATTERN.match(kernel_id):
            raise KernelLoadError(f"kernel id {kernel_id!r} is not a C identifier fragment ([A-Za-z0-9_]+)")
        self.path = Path(path)
        self.kernel_id = kernel_id
        # A run-time variant's fields (a GEMM's swizzle, splits): bind() sets them on every argument struct.
        self.arguments = dict(arguments or {})
        fields = {name for name, _ in (args_type or FAMILY_ABIS["gemm"].struct)._fields_}
        unknown = sorted(set(self.arguments) - fields)
        if unknown:
            raise KernelLoadError(f"arguments {unknown} are not fields of "
                                  f"{(args_type or FAMILY_ABIS['gemm'].struct).__name__}")
        if not self.path.is_file():
            raise KernelLoadError(f"{self.path}: no such file (was the candidate built?)")
        try:
            # RTLD_LOCAL: candidates built from the same template export the same helper symbols.
            self._lib = ctypes.CDLL(str(self.path), mode=ctypes.RTLD_LOCAL)
        except OSError as e:
            raise KernelLoadError(f"{self.path}: dlopen failed: {e}") from e
        args_p = ctypes.POINTER(args_type or FAMILY_ABIS["gemm"].struct)
        self._can_implement = self._symbol("can_implement", ctypes.c_int, [args_p])
        self._workspace_bytes = self._symbol("workspace_bytes", ctypes.c_size_t, [args_p]) if has_workspace else None
        # Optional: a GEMM kernel's copy of a constant B (families without it export neither).
        self._prepared_b_bytes = self._symbol("prepared_b_bytes", ctypes.c_size_t, [args_p], required=False)
        self._prepare_b = self._symbol("prepare_b", ctypes.c_int, [args_p, ctypes.c_void_p], required=False)
        self._run = self._symbol("run", ctypes.c_int, [args_p])
        self._describe = self._symbol("describe", ctypes.c_char_p, [])

    def _symbol(self, suffix: str, restype, argtypes, required: bool = True):
        name = f"fact_{self.kernel_id}_{suffix}"
        try:
            fn = getattr(self._lib, name)
        except AttributeError as e:
            if not required:
                return None
            raise KernelLoadError(
                f"{self.path}: does not export {name} (the id in the request must match the kernel's config id)"
            ) from e
        fn.restype = restype
        fn.argtypes = argtypes
        return fn

    def bind(self, args):
        """Sets this candidate's own argument fields on args (built by the family's case); returns args."""
        for name, value in self.arguments.items():
            setattr(args, name, value)
        return args

    def can_implement(self, args) -> int:
        return int(self._can_implement(ctypes.byref(args)))

    def workspace_bytes(self, args) -> int:
        return int(self._workspace_bytes(ctypes.byref(args))) if self._workspace_bytes else 0

    def prepared_b_bytes(self, args) -> int:
        return int(self._prepared_b_bytes(ctypes.byref(args))) if self._prepared_b_bytes else 0

    def prepare_b(self, args, out_ptr: int) -> int:
        return int(self._prepare_b(ctypes.byref(args), ctypes.c_void_p(out_ptr)))

    def run(self, args) -> int:
        return int(self._run(ctypes.byref(args)))

    def run_fn(self):
        """The raw ctypes function, for timing loops that pass prebuilt byref() arguments."""
        return self._run

    def describe(self) -> str:
        text = self._describe()
        return text.decode("utf-8", errors="replace") if text else ""
