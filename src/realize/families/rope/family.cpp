// The rope family behind the KernelFamily seam: rope matches (x * cos + rotate_half(x) * sin) to kernels
// rendered from templates/cute/rope_fwd.cu.in.
#include <fmt/format.h>

#include "realize/kernel_family.h"

#include "realize/candidate_tuner.h"
#include "realize/families/rope/rope_codegen.h"
#include "realize/families/rope/rope_config.h"
#include "realize/families/rope/rope_problem.h"

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

  CandidateSet candidates(const nlohmann::json& problem, int top_n) const override {
    CandidateSet out;
    for (const auto& c : enumerate_rope_configs(RopeProblem::from_json(problem), top_n).ranked)
      out.ranked.push_back(candidate(c));
    out.space = fmt::format("rope config space: {} candidates kept after pruning and ranking", out.ranked.size());
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

  std::string op_wrapper(const nlohmann::json& config) const override {
    return generate_rope_op_wrapper(RopeConfig::from_json(config)).text;
  }

  std::string op_schema(const nlohmann::json& config) const override {
    return rope_op_schema(RopeConfig::from_json(config));
  }

  nlohmann::json manifest_fields(const nlohmann::json& config) const override {
    return {{"element", config.value("element", std::string("unknown"))}};
  }

  // x as the module's view (read in place through its strides), cos/sin as the module's [seq, D] tables; the
  // result has x's shape in the layout PyTorch's elementwise ops give (x's dim order), as the anchor had.
  OpCall op_call(const OpCallSite& s) const override {
    return {"", fmt::format("{}({}, {}, {})", s.op, s.tensor("x", true), s.tensor("cos", true), s.tensor("sin", true))};
  }

 private:
  static FamilyCandidate candidate(const RopeConfig& c) {
    return {c.id(), c.to_json(), c.summary(), c.arch, generate_rope_kernel(c)};
  }
};

}  // namespace

const bool registered = register_kernel_family(std::make_unique<RopeFamily>());

}  // namespace fact::realize
