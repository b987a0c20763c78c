#include "realize/op_library_build.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "core/process_counts.h"
#include "core/python_worker.h"
#include "core/sha256.h"
#include "realize/kernel_build_job.h"
#include "realize/kernel_builder.h"

namespace fact::realize {
namespace fs = std::filesystem;

namespace {

// The builder's exit status when this Python has no CUDA build of torch (python/fact/realize/op_library_build.py).
constexpr int kBuilderNeedsCudaTorch = 3;

// The builder's kernel compiles ("kernel <id>" steps: compiled, or up_to_date) join report.json's tally.
void note_kernel_compiles(const fs::path& build_result) {
  if (!fs::exists(build_result)) return;
  try {
    for (const auto& step : read_json_file(build_result, "op library build result").value("steps", nlohmann::json::array())) {
      std::string name = step.value("name", "");
      if (name.rfind("kernel ", 0) == 0) note_kernel_build(name.substr(7), step.value("status", "") == "compiled");
    }
  } catch (const Error&) {  // an unreadable result only loses report detail; the exit status says what happened
  }
}

// Why this Python cannot compile the op library ("" when it can): the builder needs a CUDA build of torch.
std::string missing_cuda_torch() {
  auto r = run_python_module("fact.environment", {"--cuda-torch"}, std::chrono::seconds(300));
  try {
    auto answer = nlohmann::json::parse(r.out);
    if (answer.value("cuda_torch", false)) return "";
    return answer.value("cuda_torch_reason", nlohmann::json("")).is_string()
               ? answer["cuda_torch_reason"].get<std::string>() : "";
  } catch (const nlohmann::json::exception&) {
    return "the Python worker gave no answer (exit " + std::to_string(r.exit_code) + "): " + r.err.substr(0, 500);
  }
}

}  // namespace

nlohmann::json prebuild_kernel_objects(const OpLibraryFolder& folder, unsigned jobs, std::ostream& log) {
  std::vector<BuildJob> build_jobs;
  for (const auto& c : folder.kernels) build_jobs.push_back(kernel_build_job(c));
  auto results = build_kernels(build_jobs, kernel_build_options(jobs));
  nlohmann::json objects = nlohmann::json::object();
  int cached = 0, compiled = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    if (!r.ok() || r.object.empty()) {
      log << fmt::format("  kernel {}: no object from the kernel cache ({}); the builder compiles it from source\n{}\n",
                         r.id, to_string(r.status), r.diagnostics);
      continue;
    }
    (r.status == BuildStatus::cached ? cached : compiled) += 1;
    objects[r.id] = {{"object", r.object.string()}, {"source_sha256", sha256_hex(build_jobs[i].source)}};
  }
  log << fmt::format("kernel objects: {} from the kernel cache, {} compiled now (and kept there), {} left to the "
                     "builder\n", cached, compiled, results.size() - cached - compiled);
  nlohmann::json listing = {{"format", "fact-prebuilt-objects"}, {"version", 1}, {"objects", objects}};
  write_file_atomic(folder.dir / kPrebuiltObjectsFile, listing.dump(1) + "\n");
  return listing;
}

namespace {

void compile_library(const OpLibraryFolder& folder, unsigned jobs, std::ostream& out, std::ostream& log) {
  const fs::path& dir = folder.dir;
  // Checked first, so that a machine that cannot link the library does not compile kernels for it.
  if (std::string why = missing_cuda_torch(); !why.empty())
    throw Error(fmt::format("compiling the op library needs the GPU machine's torch (a CUDA build of PyTorch) and "
                            "nvcc; {} has none ({}). The folder {} is written: copy it there and run "
                            "`python -m fact.realize.op_library_build {}`",
                            python_exe(), why, dir.string(), dir.string()));
  prebuild_kernel_objects(folder, jobs, log);
  std::vector<std::string> args = {dir.string()};
  if (jobs) {
    args.push_back("--jobs");
    args.push_back(std::to_string(jobs));
  }
  log << "linking with " << python_exe() << " -m fact.realize.op_library_build " << dir.string()
      << " (in the Python worker; it compiles ops.cpp and any kernel without a prebuilt object)\n";
  auto r = run_python_module("fact.realize.op_library_build", args);
  out << r.out;
  log << r.err;
  note_kernel_compiles(dir / "build_result.json");
  if (r.exit_code == kBuilderNeedsCudaTorch)
    throw Error(fmt::format("compiling the op library needs the GPU machine's torch (a CUDA build of PyTorch) and "
                            "nvcc; {} has none. The folder {} is written: copy it there and run "
                            "`python -m fact.realize.op_library_build {}`",
                            python_exe(), dir.string(), dir.string()));
  if (r.exit_code != 0)
    throw Error(fmt::format("op library build failed (exit {}{}); see the messages above, or run "
                            "`python -m fact.realize.op_library_build {}` to retry",
                            r.exit_code, r.timed_out ? ", timed out" : "", dir.string()));
}

}  // namespace

OpLibraryFolder build_op_library(const OpLibraryBuildRequest& o, std::ostream& out, std::ostream& log) {
  auto entries = op_library_entries(o.reports);
  auto folder = write_op_library(entries, o.out);
  out << fmt::format("{:<30} {:<44} {}\n", "op", "config", "tuned for");
  for (const auto& e : entries) {
    std::string tuned;
    for (const auto& t : e.tuned_for) {
      const auto& p = t["problem"];
      std::string shape = e.family == "gemm" ? fmt::format("{}x{}x{}", p.value("m", 0), p.value("n", 0), p.value("k", 0))
                                             : e.family;
      tuned += fmt::format("{}{} {}", tuned.empty() ? "" : ", ", t.value("pattern", "?"), shape);
    }
    out << fmt::format("{:<30} {:<44} {}\n", "fact::" + e.op_name, e.summary.substr(0, 44), tuned);
  }
  out << fmt::format("Op library with {} op(s) written to {} (manifest {})\n", folder.op_names.size(),
                     folder.dir.string(), folder.manifest.string());
  if (o.compile) compile_library(folder, o.jobs, out, log);
  return folder;
}

}  // namespace fact::realize
