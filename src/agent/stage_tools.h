#pragma once
// The real Tools: discover's plan, cost model and example index; nvcc through the kernel builder (a
// private scratch folder, a time limit, a content-addressed cache); verification and profiling by the
// Python harness in its own process with a time limit; the user registry.
#include <chrono>
#include <filesystem>
#include <string>

#include "agent/agent.h"
#include "discover/user_registry.h"

namespace fact::agent {

struct StageToolsOptions {
  std::filesystem::path work_dir;                  // fragments, verdicts; kernels build in the kernel cache
  std::chrono::seconds compile_timeout{300};
  std::chrono::seconds verify_timeout{300};        // the harness is killed (process group) past this
};

class StageTools : public Tools {
 public:
  StageTools(discover::Plan plan, ArchSpec arch, discover::UserRegistry registry, StageToolsOptions options);
  const discover::Plan& plan() const override { return plan_; }
  nlohmann::json inspect_graph() const override;
  std::vector<std::string> list_rules() const override;
  std::vector<discover::ExampleHit> retrieve_examples(const std::string& query, size_t k) const override;
  discover::CostEstimate estimate_cost(const RowwiseFragment& f) const override;
  const ArchSpec& arch() const override { return arch_; }
  CompileResult compile(const KernelCandidate& k) override;
  Verdict verify(const KernelCandidate& k, const CompileResult& c, const nlohmann::json& fragment) override;
  discover::RegistryEntry registry_entry(const std::string& name) const override { return registry_.get(name); }
  std::filesystem::path register_pattern(const nlohmann::json& rule, const nlohmann::json& record,
                                         const std::string& source) override;

 private:
  discover::Plan plan_;
  ArchSpec arch_;
  discover::UserRegistry registry_;
  StageToolsOptions options_;
  int verify_count_ = 0;
};

// argv template (kernel builder placeholders) that compiles a generated kernel into a shared library:
// C++17, -O3, CUTLASS/CuTe include folders, the rendered kernel_abi.h's folder (kernel_abi_include_dir()).
std::vector<std::string> generated_kernel_command(const std::string& arch);

}  // namespace fact::agent
