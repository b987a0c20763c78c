#pragma once
// kernel_abi.h, the C ABI every generated kernel exports, rendered from data: templates/abi/kernel_abi.h.in holds
// the shared parts (version, FactStatus, the export convention), data/kernel_abi.json the version, the field
// types and the functions, and each data/families/<family>.json its "abi" section (struct, doc, fields). So a
// new family edits no shared ABI file; python/fact/realize/kernel_abi.py builds the ctypes mirror from the same
// data. docs/kernel-abi.md describes the format.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace fact::realize {

// One member of a family's argument struct.
struct AbiField {
  std::string name;
  std::string type;     // a type of data/kernel_abi.json's vocabulary: "int64", "const_ptr", ...
  std::string count;    // "" for a scalar, else the array length: a number or one of the family's constants
  std::string comment;  // "" or a short note after the member
};

// A family's checked "abi" section.
struct FamilyAbi {
  std::string family;
  std::string struct_name;                                 // e.g. FactGemmArgs
  std::vector<std::string> doc;                            // the struct's semantics (the spec), one line each
  std::vector<std::pair<std::string, int64_t>> constants;  // #defines before the struct, by name
  std::vector<AbiField> fields;                            // in memory order
  std::vector<std::string> functions;                      // fact_<id>_<function> the family's kernels export
};

// Checks `abi`, the "abi" object of data/families/<family>.json, against data/kernel_abi.json's vocabulary.
// Throws Error naming the family and the field at fault.
FamilyAbi parse_family_abi(const std::string& family, const nlohmann::json& abi);
// The checked "abi" section of a family's data file.
FamilyAbi family_abi(const std::string& family);
// FACT_KERNEL_ABI_VERSION: data/kernel_abi.json's "version".
int kernel_abi_version();

// A family's struct as the header has it: doc comment, #defines, typedef (the agent's prompts quote it).
std::string render_family_abi(const FamilyAbi& abi);
// The whole kernel_abi.h: the shared parts, then every registered family's struct, in registry order. Throws
// Error when two families declare the same struct or constant.
std::string kernel_abi_header();

// Writes `header` to root/<hash>/kernel_abi.h, hash being the first 16 hex digits of its SHA-256, unless the
// file is there already, and returns that folder. Named by the text, so the nvcc argv that adds it with -I (and
// the kernel build cache key made from the argv) changes whenever the header's text does.
std::filesystem::path write_kernel_abi_include(const std::filesystem::path& root, const std::string& header);
// write_kernel_abi_include(<kernel cache>/include, kernel_abi_header()): where candidates' nvcc finds kernel_abi.h.
std::filesystem::path kernel_abi_include_dir();

}  // namespace fact::realize
