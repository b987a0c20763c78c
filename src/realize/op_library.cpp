#include "realize/op_library.h"

#include <fmt/format.h>

#include <map>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "realize/gemm_codegen.h"
#include "realize/gemm_problem.h"
#include "realize/kernel_abi.h"
#include "realize/nvcc_command.h"
#include "realize/toolchain.h"

namespace fact::realize {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kManifestFormat = "fact-op-library";
constexpr int kManifestVersion = 1;
constexpr const char* kLibraryName = "libfact_ops.so";

std::string op_name(const GemmConfig& c) { return "gemm_" + c.id(); }
std::string kernel_source(const GemmConfig& c) { return "kernels/" + c.id() + ".cu"; }
std::string kernel_object(const GemmConfig& c) { return "build/" + c.id() + ".o"; }

json optional_number(const json& row, const char* key) {
  return row.contains(key) && row[key].is_number() ? row[key] : json(nullptr);
}

// The kernel's nvcc argv without the executable, from nvcc_command() itself so that the op library
// compiles exactly as the tuner did; machine paths become placeholders the builder fills in.
json nvcc_args_template(const GemmConfig& c) {
  auto argv = nvcc_command(c, kSourcePlaceholder, kOutputPlaceholder, kCutlassDirPlaceholder, NvccOutput::object);
  const std::string fact_include = "-I" + (fact_home() / "src" / "realize").string();
  json args = json::array();
  for (size_t i = 1; i < argv.size(); ++i)
    args.push_back(argv[i] == fact_include ? std::string("-I") + kFactIncludePlaceholder : argv[i]);
  return args;
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
  for (size_t i = 0; i < entries.size(); ++i) index[entries[i].config.id()] = i;
  const auto& rows = report["rows"];
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    std::string at = fmt::format("{}: rows[{}]", where, i);
    if (!row.is_object()) throw Error(at + ": not a JSON object" + fix);
    if (!row.contains("config") || row["config"].is_null()) continue;  // PyTorch kept, not realized, or build-only
    // Winners of the normalization/attention families (rows with a non-GEMM "family") are not wrapped
    // into this library yet; the composer keeps PyTorch's ops for them and says so.
    if (row.contains("family") && row["family"] != "gemm") continue;
    if (!row["config"].is_object()) throw Error(at + ".config: not an object (a GemmConfig JSON or null)" + fix);
    GemmConfig config;
    try {
      config = GemmConfig::from_json(row["config"]);
    } catch (const Error& e) {
      throw Error(at + ".config: " + e.what());
    }
    if (!row.contains("problem") || !row["problem"].is_object())
      throw Error(at + ".problem: missing; the op check needs the problem the winner was tuned for" + fix);
    try {
      (void)GemmProblem::from_json(row["problem"]);
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
    auto [it, fresh] = index.emplace(config.id(), entries.size());
    if (fresh) entries.push_back({config, {}});
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

json op_library_manifest(const std::vector<OpLibraryEntry>& entries) {
  json ops = json::array();
  for (const auto& e : entries) {
    const GemmConfig& c = e.config;
    ops.push_back({{"name", op_name(c)},
                   {"op", "fact::" + op_name(c)},
                   {"schema", op_name(c) + "(Tensor a, Tensor b, Tensor? bias, Tensor? residual) -> Tensor"},
                   {"config_id", c.id()},
                   {"summary", c.summary()},
                   {"config", c.to_json()},
                   {"numerics", to_string(c.numerics)},
                   {"arch", to_string(c.arch)},
                   {"gencode", nvcc_gencode(c.arch)},
                   {"epilogue", to_string(c.epilogue)},
                   {"has_bias", has_bias(c.epilogue)},
                   {"has_residual", has_residual(c.epilogue)},
                   {"element_in", to_string(c.element_in)},
                   {"element_out", to_string(c.element_out)},
                   {"layout", {{"a", to_string(c.layout_a)}, {"b", to_string(c.layout_b)}, {"d", to_string(c.layout_d)}}},
                   {"template", gemm_kernel_template(c)},
                   {"kernel_source", kernel_source(c)},
                   {"kernel_object", kernel_object(c)},
                   {"nvcc_args", nvcc_args_template(c)},
                   {"cutlass_version", first_version(e, "cutlass_version")},
                   {"nvcc_version", first_version(e, "nvcc_version")},
                   {"tuned_for", e.tuned_for}});
  }
  return {{"format", kManifestFormat},
          {"version", kManifestVersion},
          {"namespace", "fact"},
          {"library", kLibraryName},
          {"kernel_abi_version", FACT_KERNEL_ABI_VERSION},
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

OpLibraryFolder write_op_library(const std::vector<OpLibraryEntry>& entries, const fs::path& dir) {
  if (entries.empty()) throw Error("op library: no ops to write to " + dir.string() + "; pass at least one winning config");
  // Everything is generated first: a config the generator rejects leaves the folder as it was.
  std::vector<GemmConfig> configs;
  std::vector<GeneratedSource> kernels;
  for (const auto& e : entries) {
    configs.push_back(e.config);
    kernels.push_back(generate_gemm_kernel(e.config));
  }
  GeneratedSource wrapper = generate_gemm_op_wrapper(configs);
  json manifest = op_library_manifest(entries);
  std::string abi = read_text_file(fact_home() / "src" / "realize" / "kernel_abi.h", "kernel ABI header");

  std::error_code ec;
  fs::create_directories(dir / "kernels", ec);
  if (ec) throw Error("op library: cannot create " + (dir / "kernels").string() + ": " + ec.message());
  fs::create_directories(dir / "include", ec);
  // Kernels of an earlier set would only confuse a reader: the manifest is what gets built.
  for (const auto& f : fs::directory_iterator(dir / "kernels"))
    if (f.path().extension() == ".cu") fs::remove(f.path());
  for (size_t i = 0; i < kernels.size(); ++i) write_file_atomic(dir / kernel_source(configs[i]), kernels[i].text);
  write_file_atomic(dir / "ops.cpp", wrapper.text);
  write_file_atomic(dir / "include" / "kernel_abi.h", abi);
  write_file_atomic(dir / "manifest.json", manifest.dump(1) + "\n");

  OpLibraryFolder out{dir, dir / "manifest.json", {}};
  for (const auto& c : configs) out.op_names.push_back(op_name(c));
  return out;
}

}  // namespace fact::realize
