// The rope family behind the KernelFamily seam: rope matches (x * cos + rotate_half(x) * sin) to kernels
// rendered from templates/cute/rope_fwd.cu.in.
#include "realize/rope_family.h"

#include "realize/candidate_tuner.h"
#include "realize/rope_codegen.h"
#include "realize/rope_config.h"
#include "realize/rope_problem.h"

namespace fact::realize {
namespace {

class RopeFamily final : public KernelFamily {
 public:
  std::string name() const override { return "rope"; }

  nlohmann::json problem_from_match(const discover::Match& m, const ir::Graph& g, Numerics numerics,
                                    Arch arch) const override {
    return rope_problem_from_match(m, g, numerics, arch).to_json();
  }

  WorkloadKey workload_key(const std::string& pattern, const nlohmann::json& problem) const override {
    RopeProblem p = RopeProblem::from_json(problem);
    return make_workload_key(pattern, p.to_json(), to_string(p.element), "bhsd", to_string(p.numerics()), to_string(p.arch));
  }

  std::vector<FamilyCandidate> candidates(const nlohmann::json& problem, int top_n) const override {
    std::vector<FamilyCandidate> out;
    for (const auto& c : enumerate_rope_configs(RopeProblem::from_json(problem), top_n).ranked)
      out.push_back(candidate(c));
    return out;
  }

  FamilyCandidate candidate_from_config(const nlohmann::json& config) const override {
    return candidate(RopeConfig::from_json(config));
  }

  nlohmann::json measure_problem(const nlohmann::json& problem) const override {
    RopeProblem p = RopeProblem::from_json(problem);
    nlohmann::json j = p.to_json();
    j.erase("element");
    j.erase("arch");
    j["dtype"] = to_string(p.element);
    return j;
  }

  GeneratedSource op_wrapper(const nlohmann::json& config) const override {
    return generate_rope_op_wrapper(RopeConfig::from_json(config));
  }

  std::string op_schema(const nlohmann::json& config) const override {
    return rope_op_schema(RopeConfig::from_json(config));
  }

 private:
  static FamilyCandidate candidate(const RopeConfig& c) {
    return {c.id(), c.to_json(), c.summary(), c.arch, generate_rope_kernel(c)};
  }
};

}  // namespace

const KernelFamily& rope_family() {
  static const RopeFamily family;
  return family;
}

}  // namespace fact::realize
