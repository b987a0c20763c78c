// The normalization family behind the KernelFamily seam: LayerNorm and RMSNorm (optionally after a
// residual add), from the rules layer_norm / rms_norm / add_layer_norm / add_rms_norm to kernels rendered
// from templates/cute/.
#include <fmt/format.h>

#include "compose/python_expr.h"
#include "realize/kernel_family.h"

#include "realize/candidate_tuner.h"
#include "realize/families/normalization/norm_codegen.h"
#include "realize/families/normalization/norm_config.h"
#include "realize/families/normalization/norm_problem.h"

namespace fact::realize {
namespace {

class NormFamily final : public KernelFamily {
 public:
  std::string name() const override { return "normalization"; }

  nlohmann::json problem_from_match(const discover::Match& m, const ir::Graph& g, Numerics numerics,
                                    Arch arch) const override {
    return norm_problem_from_match(m, g, numerics, arch).to_json();
  }

  WorkloadKey workload_key(const std::string& pattern, const nlohmann::json& problem) const override {
    NormProblem p = NormProblem::from_json(problem);
    return make_workload_key(pattern, p.to_json(), to_string(p.element), "row", to_string(p.numerics()), to_string(p.arch));
  }

  CandidateSet candidates(const nlohmann::json& problem, int top_n) const override {
    CandidateSet out;
    for (const auto& c : enumerate_norm_configs(NormProblem::from_json(problem), top_n).ranked)
      out.ranked.push_back(candidate(c));
    out.space = fmt::format("normalization config space: {} candidates kept after pruning and ranking", out.ranked.size());
    return out;
  }

  FamilyCandidate candidate_from_config(const nlohmann::json& config) const override {
    return candidate(NormConfig::from_json(config));
  }

  nlohmann::json measure_problem(const nlohmann::json& problem) const override {
    NormProblem p = NormProblem::from_json(problem);
    return {{"kind", to_string(p.kind)}, {"rows", p.rows}, {"cols", p.cols}, {"x_row_stride", p.x_row_stride},
            {"residual_row_stride", p.residual_row_stride}, {"has_weight", p.has_weight}, {"has_bias", p.has_bias},
            {"has_residual", p.has_residual}, {"store_sum", p.store_sum}, {"eps", p.eps},
            {"dtype", to_string(p.element)}, {"numerics", to_string(p.numerics())}};
  }

  std::string op_wrapper(const nlohmann::json& config) const override {
    return generate_norm_op_wrapper(NormConfig::from_json(config)).text;
  }

  std::string op_schema(const nlohmann::json& config) const override {
    return norm_op_schema(NormConfig::from_json(config));
  }

  nlohmann::json manifest_fields(const nlohmann::json& config) const override {
    return {{"element", config.value("element", std::string("unknown"))}};
  }

  // (x, residual, weight, bias, eps); a config that also writes x + residual returns (y, sum), y the anchor.
  OpCall op_call(const OpCallSite& s) const override {
    return {"", fmt::format("{}({}, {}, {}, {}, {})", s.op, s.tensor("x", true), s.tensor("residual", false),
                            s.tensor("weight", false), s.tensor("bias", false),
                            compose::python_float(s.scalar("eps", false).get<double>()))};
  }

  std::vector<std::string> op_returns(const nlohmann::json& config) const override {
    if (config.is_object() && config.value("store_sum", false)) return {"y", "sum"};
    return {"anchor"};
  }

 private:
  static FamilyCandidate candidate(const NormConfig& c) {
    return {c.id(), c.to_json(), c.summary(), c.arch, generate_norm_kernel(c)};
  }
};

}  // namespace

const bool registered = register_kernel_family(std::make_unique<NormFamily>());

}  // namespace fact::realize
