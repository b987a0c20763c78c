#pragma once
// The op library: tuned winners as PyTorch custom ops in one folder that python -m
// fact.realize.op_library_build compiles into a single libfact_ops.so: every kernel family's winners
// (kernel_family.h) as torch.ops.fact.<op name> (gemm_<id>, norm_<id>, ...), each rendered from its family's
// templates. This side only writes sources and the manifest (no GPU, no torch); the manifest (format
// "fact-op-library": per op its name, config, numerics, tuned problems and toolchain versions, and the build flags
// with placeholders the Python builder fills in on the GPU machine) is the build's only input.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "realize/kernel_family.h"

namespace fact::realize {

// One op: a winning config and every tuned problem it won (a config can win several).
struct OpLibraryEntry {
  std::string family;           // a KernelFamily's name (the report row's "family")
  nlohmann::json config;        // the config as the family writes it
  std::string config_id;        // its id: kernel symbols are fact_<config_id>_*
  std::string op_name;          // the op in torch.ops.fact (KernelFamily::op_name)
  std::string summary;
  // Per winning report row: report, pattern, anchor, problem (the family's problem JSON), workload key,
  // fact_ms, baseline_ms, speedup, rel_err.
  std::vector<nlohmann::json> tuned_for;
};

// The winners of `fact tune --report` JSON files: rows whose "config" is non-null, merged by config id
// in first-seen order. Throws Error naming the file (and row) when it is not a tune report, when a
// row's config or problem does not parse, names an unknown family, or when no row of any file has a winner.
std::vector<OpLibraryEntry> op_library_entries(const std::vector<std::filesystem::path>& reports);
// The same for one report already read; `where` names it in errors. Returns no entries when no row won.
void add_op_library_entries(const nlohmann::json& report, const std::string& where,
                            std::vector<OpLibraryEntry>& entries);

struct OpLibraryFolder {
  std::filesystem::path dir;
  std::filesystem::path manifest;
  std::vector<std::string> op_names;  // KernelFamily::op_name of each op, in manifest order
  // Each op's rendered kernel, in manifest order: what the kernel cache builds (kernel_build_job.h), so the
  // library links the tuner's object instead of compiling the kernel again.
  std::vector<FamilyCandidate> kernels;
};

// Writes DIR/kernels/<id>.cu, DIR/ops.cpp, DIR/include/kernel_abi.h and DIR/manifest.json (and removes an
// earlier DIR/prebuilt_objects.json: its objects belong to the earlier kernels). Kernels are generated before
// anything is written, so a config that cannot be generated leaves DIR untouched.
OpLibraryFolder write_op_library(const std::vector<OpLibraryEntry>& entries, const std::filesystem::path& dir);

// Placeholders in the manifest's command lines.
inline constexpr const char* kCutlassDirPlaceholder = "{cutlass_dir}";
inline constexpr const char* kFactIncludePlaceholder = "{fact_include}";
inline constexpr const char* kSourcePlaceholder = "{source}";
inline constexpr const char* kOutputPlaceholder = "{output}";

// The folder's list of kernel objects taken from the kernel cache (format "fact-prebuilt-objects"): per config
// id the object and the SHA-256 of the kernel source it was compiled from. The Python builder links an object
// whose source matches DIR/kernels/<id>.cu and compiles the kernel only otherwise.
inline constexpr const char* kPrebuiltObjectsFile = "prebuilt_objects.json";

}  // namespace fact::realize
