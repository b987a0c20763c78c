#include "realize/op_library.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "core/error.h"
#include "core/files.h"
#include "realize/families/gemm/gemm_codegen.h"
#include "realize/kernel_abi_header.h"
#include "realize/kernel_family.h"
#include "realize/nvcc_command.h"
#include "realize/toolchain.h"

namespace fact::realize {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kManifestFormat = "fact-op-library";
constexpr int kManifestVersion = 1;
constexpr const char* kLibraryName = "libfact_ops.so";

std::string kernel_source(const std::string& id) { return "kernels/" + id + ".cu"; }
std::string kernel_object(const std::string& id) { return "build/" + id + ".o"; }

json optional_number(const json& row, const char* key) {
  return row.contains(key) && row[key].is_number() ? row[key] : json(nullptr);
}

// The kernel's nvcc argv without the executable, from nvcc_command() itself so that the op library
// compiles exactly as the tuner did; machine paths are placeholders the builder fills in.
json nvcc_args_template(Arch arch) {
  auto argv = nvcc_command(arch, kSourcePlaceholder, kOutputPlaceholder, kCutlassDirPlaceholder, NvccOutput::object,
                           kFactIncludePlaceholder);
  return json(std::vector<std::string>(argv.begin() + 1, argv.end()));
}

// Versions on the machine writing the folder; the folder is still useful without them.
json toolchain_here() {
  json t;
  try { t["cutlass_version"] = cutlass_version(); } catch (const Error& e) { t["cutlass_version"] = std::string("unknown: ") + e.what(); }
  try { t["nvcc_version"] = nvcc_version(); } catch (const Error& e) { t["nvcc_version"] = std::string("unknown: ") + e.what(); }
  return t;
}

std::string first_version(const OpLibraryEntry& e, const char* key) {
  for (const auto& t : e.tuned_for)
    if (t.contains("workload") && t["workload"].is_object() && t["workload"].value(key, "") != "")
      return t["workload"][key].get<std::string>();
  return "unknown";
}

}  // namespace

void add_op_library_entries(const json& report, const std::string& where, std::vector<OpLibraryEntry>& entries) {
  const std::string fix = "; pass the JSON that `fact tune PLAN --report FILE` wrote";
  if (!report.is_object()) throw Error(where + ": not a JSON object" + fix);
  if (report.value("format", "") != "fact-tune-report")
    throw Error(where + ": \"format\" is " + (report.contains("format") ? report["format"].dump() : "missing") +
                ", expected \"fact-tune-report\"" + fix);
  if (!report.contains("rows") || !report["rows"].is_array()) throw Error(where + ": \"rows\" is missing or not a list" + fix);

  std::map<std::string, size_t> index;
  for (size_t i = 0; i < entries.size(); ++i) index[entries[i].op_name] = i;
  const auto& rows = report["rows"];
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    std::string at = fmt::format("{}: rows[{}]", where, i);
    if (!row.is_object()) throw Error(at + ": not a JSON object" + fix);
    if (!row.contains("config") || row["config"].is_null()) continue;  // PyTorch kept, not realized, or build-only
    OpLibraryEntry entry;
    entry.family = report_row_family(row);
    const KernelFamily* family = kernel_family_named(entry.family);
    if (!family)
      throw Error(fmt::format("{}.family: \"{}\" is no kernel family FACT knows ({}){}", at, entry.family,
                              fmt::join(kernel_family_names(), ", "), fix));
    if (!row["config"].is_object())
      throw Error(at + ".config: not an object (the winning " + entry.family + " config JSON, or null)" + fix);
    try {
      // Rendering the config checks it the way the tuner did, and gives its id.
      FamilyCandidate c = family->candidate_from_config(row["config"]);
      entry.config = c.config;
      entry.config_id = c.config_id;
      entry.op_name = family->op_name(c.config_id);
      entry.summary = c.summary;
    } catch (const Error& e) {
      throw Error(at + ".config: " + e.what());
    }
    if (!row.contains("problem") || !row["problem"].is_object())
      throw Error(at + ".problem: missing; the op check needs the problem the winner was tuned for" + fix);
    try {
      (void)family->measure_problem(row["problem"]);  // parses the problem
    } catch (const Error& e) {
      throw Error(at + ".problem: " + e.what());
    }
    json tuned = {{"report", where},
                  {"row", i},
                  {"pattern", row.value("pattern", "")},
                  {"anchor", row.value("anchor", "")},
                  {"status", row.value("status", "")},
                  {"problem", row["problem"]},
                  {"workload", row.value("workload", json(nullptr))},
                  {"fact_ms", optional_number(row, "fact_ms")},
                  {"baseline", row.value("baseline", "")},
                  {"baseline_ms", optional_number(row, "baseline_ms")},
                  {"speedup", optional_number(row, "speedup")},
                  {"rel_err", optional_number(row, "rel_err")}};
    auto [it, fresh] = index.emplace(entry.op_name, entries.size());
    if (fresh) entries.push_back(std::move(entry));
    entries[it->second].tuned_for.push_back(std::move(tuned));
  }
}

std::vector<OpLibraryEntry> op_library_entries(const std::vector<fs::path>& reports) {
  if (reports.empty()) throw Error("op library: no tune report given; pass the files `fact tune --report` wrote");
  std::vector<OpLibraryEntry> entries;
  for (const auto& path : reports) add_op_library_entries(read_json_file(path, "tune report"), path.string(), entries);
  if (entries.empty()) {
    std::string names;
    for (const auto& p : reports) names += (names.empty() ? "" : ", ") + p.string();
    throw Error("op library: no FACT kernel won in " + names +
                " (every row has \"config\": null: PyTorch was kept, or the tune was --build-only); "
                "tune problems where a FACT kernel wins, or pass more reports");
  }
  return entries;
}

namespace {

// One op of the manifest, `c` its rendered config: what every family writes, then the family's own fields
// (KernelFamily::manifest_fields).
json manifest_op(const OpLibraryEntry& e, const KernelFamily& family, const FamilyCandidate& c) {
  // The numerics the winner was verified in: the config's, else its tuned problem's (a norm's follows its element).
  std::string numerics = e.config.value("numerics", std::string());
  for (const auto& t : e.tuned_for)
    if (numerics.empty() && t.contains("problem") && t["problem"].is_object())
      numerics = t["problem"].value("numerics", std::string());
  json op = {{"name", e.op_name},
             {"op", "fact::" + e.op_name},
             {"family", e.family},
             {"schema", family.op_schema(e.config)},
             {"config_id", c.config_id},
             {"summary", c.summary},
             {"config", c.config},
             {"numerics", numerics.empty() ? "unknown" : numerics},
             {"arch", to_string(c.arch)},
             {"gencode", nvcc_gencode(c.arch)},
             {"template", c.kernel.template_name},  // the config's own: a family may have several kernels
             {"op_template", family_data(e.family).value("op_template", "")},
             // Ops whose configs are run-time variants of one kernel share its source and object.
             {"kernel_source", kernel_source(c.kernel_id())},
             {"kernel_object", kernel_object(c.kernel_id())},
             {"nvcc_args", nvcc_args_template(c.arch)},
             {"cutlass_version", first_version(e, "cutlass_version")},
             {"nvcc_version", first_version(e, "nvcc_version")},
             {"tuned_for", e.tuned_for}};
  op.update(family.manifest_fields(e.config));
  return op;
}

// The manifest (format "fact-op-library", version 1): per op its name, config, numerics, tuned problems and
// toolchain versions, and the build flags with placeholders that the Python builder fills in on the GPU machine
// ({cutlass_dir}, {fact_include}, {source}, {output}).
json op_library_manifest(const json& ops) {
  return {{"format", kManifestFormat},
          {"version", kManifestVersion},
          {"namespace", "fact"},
          {"library", kLibraryName},
          {"kernel_abi_version", kernel_abi_version()},
          {"generated_by", "fact ops build"},
          {"toolchain_when_written", toolchain_here()},
          {"build",
           {{"ops_source", "ops.cpp"},
            {"ops_object", "build/ops.o"},
            {"include_dir", "include"},
            {"object_dir", "build"},
            {"cutlass_dir",
             "resolved when building, never copied: $CUTLASS_DIR, else <dir of cutlass_library>/source of the "
             "installed nvidia-cutlass wheel"},
            {"cutlass_include_dirs", {"include", "tools/util/include"}},
            {"placeholders",
             {{kCutlassDirPlaceholder, "the CUTLASS source root"},
              {kFactIncludePlaceholder, "<library dir>/include (holds kernel_abi.h)"},
              {kSourcePlaceholder, "<library dir>/<kernel_source>"},
              {kOutputPlaceholder, "<library dir>/<kernel_object>"}}},
            {"nvcc", "$FACT_NVCC, else $CUDA_HOME/bin/nvcc, else /usr/local/cuda/bin/nvcc, else nvcc on PATH"},
            // Torch's include dirs and C++ ABI flag are added on the build machine from its torch.
            {"ops_cxx_flags", {"-std=c++17", "-O3", "-fPIC", "-DNDEBUG", std::string("-I") + kFactIncludePlaceholder}},
            {"link_libraries", {"c10", "torch", "torch_cpu", "c10_cuda", "torch_cuda", "cudart"}}}},
          {"ops", ops}};
}

}  // namespace

OpLibraryFolder write_op_library(const std::vector<OpLibraryEntry>& entries, const fs::path& dir) {
  if (entries.empty()) throw Error("op library: no ops to write to " + dir.string() + "; pass at least one winning config");
  // Everything is generated first: a config the generator rejects leaves the folder as it was.
  std::vector<FamilyCandidate> kernels;
  std::vector<std::string> wrappers;
  json ops = json::array();
  for (const auto& e : entries) {
    const KernelFamily* family = kernel_family_named(e.family);
    if (!family) throw Error("op library: op " + e.op_name + " has unknown family '" + e.family + "'");
    FamilyCandidate c = family->candidate_from_config(e.config);
    ops.push_back(manifest_op(e, *family, c));
    kernels.push_back(std::move(c));
    wrappers.push_back(family->op_wrapper(e.config));
  }
  GeneratedSource wrapper = op_library_source(wrappers);
  json manifest = op_library_manifest(ops);
  std::string abi = kernel_abi_header();

  std::error_code ec;
  fs::create_directories(dir / "kernels", ec);
  if (ec) throw Error("op library: cannot create " + (dir / "kernels").string() + ": " + ec.message());
  fs::create_directories(dir / "include", ec);
  // Kernels of an earlier set would only confuse a reader: the manifest is what gets built.
  for (const auto& f : fs::directory_iterator(dir / "kernels"))
    if (f.path().extension() == ".cu") fs::remove(f.path());
  fs::remove(dir / kPrebuiltObjectsFile, ec);
  for (size_t i = 0; i < kernels.size(); ++i)
    write_file_atomic(dir / kernel_source(kernels[i].kernel_id()), kernels[i].kernel.text);
  write_file_atomic(dir / "ops.cpp", wrapper.text);
  write_file_atomic(dir / "include" / "kernel_abi.h", abi);
  write_file_atomic(dir / "manifest.json", manifest.dump(1) + "\n");

  OpLibraryFolder out{dir, dir / "manifest.json", {}, std::move(kernels)};
  for (const auto& e : entries) out.op_names.push_back(e.op_name);
  return out;
}

}  // namespace fact::realize
