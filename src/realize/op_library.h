#pragma once
// The op library: tuned winners as PyTorch custom ops in one folder that python -m
// fact.realize.op_library_build compiles into a single libfact_ops.so: GEMMs as torch.ops.fact.gemm_<id>,
// the other kernel families (normalization, attention, rope; kernel_family.h) as torch.ops.fact.<config id>, each
// rendered from its family's templates. This side only writes sources and the manifest (no GPU, no torch);
// the manifest is the build's only input.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "realize/gemm_config.h"

namespace fact::realize {

// One op: a winning config and every tuned problem it won (a config can win several).
struct OpLibraryEntry {
  std::string family = "gemm";  // "gemm", or the name of a KernelFamily (the report row's "family")
  GemmConfig config;            // family "gemm"
  nlohmann::json family_config; // other families: the config as the family writes it
  std::string family_config_id; // and its id (norm_..., attn_..., rope_...)
  // Per winning report row: report, pattern, anchor, problem (GemmProblem JSON), workload key,
  // fact_ms, baseline_ms, speedup, rel_err.
  std::vector<nlohmann::json> tuned_for;

  std::string config_id() const { return family == "gemm" ? config.id() : family_config_id; }
  // The op in torch.ops.fact: gemm_<id> for GEMMs; a family config id already names its family.
  std::string op_name() const { return family == "gemm" ? "gemm_" + config.id() : family_config_id; }
};

// The winners of `fact tune --report` JSON files: rows whose "config" is non-null, merged by config id
// in first-seen order. Throws Error naming the file (and row) when it is not a tune report, when a
// row's config or problem does not parse, names an unknown family, or when no row of any file has a winner.
std::vector<OpLibraryEntry> op_library_entries(const std::vector<std::filesystem::path>& reports);
// The same for one report already read; `where` names it in errors. Returns no entries when no row won.
void add_op_library_entries(const nlohmann::json& report, const std::string& where,
                            std::vector<OpLibraryEntry>& entries);

// The manifest (format "fact-op-library", version 1) for these entries: per op its name, config,
// numerics, tuned problems and toolchain versions, and the build flags with placeholders that the
// Python builder fills in on the GPU machine ({cutlass_dir}, {fact_include}, {source}, {output}).
nlohmann::json op_library_manifest(const std::vector<OpLibraryEntry>& entries);

struct OpLibraryFolder {
  std::filesystem::path dir;
  std::filesystem::path manifest;
  std::vector<std::string> op_names;  // "gemm_<id>" / "<family config id>", in manifest order
};

// Writes DIR/kernels/<id>.cu, DIR/ops.cpp, DIR/include/kernel_abi.h and DIR/manifest.json. Kernels
// are generated before anything is written, so a config that cannot be generated leaves DIR untouched.
OpLibraryFolder write_op_library(const std::vector<OpLibraryEntry>& entries, const std::filesystem::path& dir);

// Placeholders in the manifest's command lines.
inline constexpr const char* kCutlassDirPlaceholder = "{cutlass_dir}";
inline constexpr const char* kFactIncludePlaceholder = "{fact_include}";
inline constexpr const char* kSourcePlaceholder = "{source}";
inline constexpr const char* kOutputPlaceholder = "{output}";

}  // namespace fact::realize
