#include "agent/stage_tools.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "core/process.h"
#include "discover/pattern_registry.h"
#include "realize/kernel_abi_header.h"
#include "realize/kernel_builder.h"
#include "realize/nvcc_command.h"
#include "realize/toolchain.h"

namespace fact::agent {
namespace fs = std::filesystem;
using nlohmann::json;

StageTools::StageTools(discover::Plan plan, ArchSpec arch, discover::UserRegistry registry,
                       StageToolsOptions options)
    : plan_(std::move(plan)), arch_(std::move(arch)), registry_(std::move(registry)), options_(std::move(options)) {
  fs::create_directories(options_.work_dir);
}

json StageTools::inspect_graph() const {
  json nodes = json::array();
  for (const auto& n : plan_.graph.nodes) {
    if (n.kind != ir::NodeKind::Op) continue;
    json args = json::array();
    for (const auto& a : n.args) args.push_back(ir::is_ref(a) ? json(ir::ref_name(a)) : a);
    json out = n.outputs.empty() ? json() : json{{"shape", n.out().shape}, {"dtype", n.out().dtype}};
    nodes.push_back({{"name", n.name}, {"op", n.op}, {"args", args}, {"out", out}});
  }
  return nodes;
}

std::vector<std::string> StageTools::list_rules() const {
  std::vector<std::string> out;
  auto builtin = discover::PatternRegistry::builtin();
  for (const auto& r : builtin.rules()) out.push_back(r.name);
  for (const auto& r : registry_.rules()) out.push_back(r.name + " (registry)");
  return out;
}

std::vector<discover::ExampleHit> StageTools::retrieve_examples(const std::string& query, size_t k) const {
  try {
    return discover::ExampleIndex::builtin(arch_.name).search(query, k);
  } catch (const Error&) {
    return {};  // no CUTLASS examples on this machine: the prompt goes without them
  }
}

discover::CostEstimate StageTools::estimate_cost(const RowwiseFragment& f) const {
  discover::Match m;
  m.rule = "candidate";
  m.family = "rowwise";
  m.anchor = f.output;
  m.nodes = f.nodes;
  m.dtype = f.dtype;
  discover::CostContext ctx{plan_.graph, arch_, plan_.numerics};
  return discover::estimate_match(m, ctx);
}

std::vector<std::string> generated_kernel_command(const std::string& arch) {
  fs::path cutlass = cutlass_dir();
  return {realize::nvcc_exe(), "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-lineinfo",
          realize::nvcc_gencode(arch == "sm90" ? Arch::sm90 : Arch::sm80), "-DNDEBUG",
          "-I" + (cutlass / "include").string(), "-I" + realize::kernel_abi_include_dir().string(),
          "-Xcompiler=-fPIC", "-shared", "{source}", "-o", "{output}"};
}

CompileResult StageTools::compile(const KernelCandidate& k) {
  BuildJob job;
  job.id = k.id;
  job.source = k.source;
  job.command = generated_kernel_command(arch_.name);
  job.timeout = options_.compile_timeout;
  BuildOptions bo;
  bo.compiler_version = realize::nvcc_version_text();
  bo.workers = 1;
  bo.max_diagnostics_chars = 2500;  // the LLM gets the first errors, not pages of template instantiations
  auto r = build_kernels({job}, bo).at(0);
  CompileResult c;
  c.ok = r.ok();
  c.timed_out = r.status == BuildStatus::timeout;
  c.library = r.library;
  c.diagnostics = r.diagnostics;
  c.seconds = r.seconds;
  return c;
}

Verdict StageTools::verify(const KernelCandidate& k, const CompileResult& c, const json& fragment) {
  fs::path dir = options_.work_dir / fmt::format("verify-{:02d}-{}", ++verify_count_, k.id);
  fs::create_directories(dir);
  write_file_atomic(dir / "fragment.json", fragment.dump(1) + "\n");
  fs::path verdict_path = dir / "verdict.json";
  ProcessOptions po;
  po.env["PYTHONPATH"] = python_dir().string();
  po.cwd = dir;  // whatever the kernel or harness writes lands here
  po.timeout = options_.verify_timeout;
  auto r = run_process({python_exe(), "-m", "fact.agent.verify_rowwise", "--fragment", (dir / "fragment.json").string(),
                        "--library", c.library.string(), "--id", k.id, "--numerics", to_string(plan_.numerics), "-o",
                        verdict_path.string()},
                       po);
  write_file_atomic(dir / "harness.log", r.out + r.err);
  Verdict v;
  if (r.timed_out) {
    v.status = "crash";
    v.message = fmt::format("the verification run exceeded {} s and was killed (a hang or an endless loop?)",
                            options_.verify_timeout.count());
    return v;
  }
  if (!fs::exists(verdict_path)) {
    v.status = "crash";
    std::string tail = r.err.size() > 1500 ? r.err.substr(r.err.size() - 1500) : r.err;
    v.message = fmt::format("the harness exited with {} without a verdict (the kernel crashed the process?): {}",
                            r.exit_code, tail);
    return v;
  }
  json doc = read_json_file(verdict_path, "verdict file");
  v.status = doc.value("status", "crash");
  v.message = doc.value("message", "");
  v.details = doc;
  return v;
}

fs::path StageTools::register_pattern(const json& rule, const json& record, const std::string& source) {
  return registry_.add(rule, record, source);
}

}  // namespace fact::agent
