// The attention family behind the KernelFamily seam: sdpa_attention / sdpa_attention_manual matches to
// kernels rendered from templates/cute/attention_fwd.cu.in (mma.sync) or attention_fwd_sm90.cu.in (wgmma).
#include "realize/attention_family.h"

#include "realize/candidate_tuner.h"
#include "realize/attention_codegen.h"
#include "realize/attention_config.h"
#include "realize/attention_problem.h"

namespace fact::realize {
namespace {

class AttentionFamily final : public KernelFamily {
 public:
  std::string name() const override { return "attention"; }

  nlohmann::json problem_from_match(const discover::Match& m, const ir::Graph& g, Numerics numerics,
                                    Arch arch) const override {
    return attention_problem_from_match(m, g, numerics, arch).to_json();
  }

  WorkloadKey workload_key(const std::string& pattern, const nlohmann::json& problem) const override {
    AttentionProblem p = AttentionProblem::from_json(problem);
    return make_workload_key(pattern, p.to_json(), to_string(p.element), "bhsd", to_string(p.numerics), to_string(p.arch));
  }

  std::vector<FamilyCandidate> candidates(const nlohmann::json& problem, int top_n) const override {
    std::vector<FamilyCandidate> out;
    for (const auto& c : enumerate_attention_configs(AttentionProblem::from_json(problem), top_n).ranked)
      out.push_back(candidate(c));
    return out;
  }

  FamilyCandidate candidate_from_config(const nlohmann::json& config) const override {
    return candidate(AttentionConfig::from_json(config));
  }

  nlohmann::json measure_problem(const nlohmann::json& problem) const override {
    AttentionProblem p = AttentionProblem::from_json(problem);
    auto s = [](const AttentionStrides& v) { return nlohmann::json::array({v.batch, v.head, v.row}); };
    return {{"batch", p.batch}, {"heads", p.heads}, {"heads_kv", p.heads_kv}, {"seq_q", p.seq_q},
            {"seq_k", p.seq_k}, {"head_dim", p.head_dim}, {"causal", p.causal}, {"scale", p.scale},
            {"q_strides", s(p.q)}, {"k_strides", s(p.k)}, {"v_strides", s(p.v)}, {"dtype", to_string(p.element)},
            {"numerics", to_string(p.numerics)}};
  }

  GeneratedSource op_wrapper(const nlohmann::json& config) const override {
    return generate_attention_op_wrapper(AttentionConfig::from_json(config));
  }

  std::string op_schema(const nlohmann::json& config) const override {
    return attention_op_schema(AttentionConfig::from_json(config));
  }

 private:
  static FamilyCandidate candidate(const AttentionConfig& c) {
    return {c.id(), c.to_json(), c.summary(), c.arch, generate_attention_kernel(c)};
  }
};

}  // namespace

const KernelFamily& attention_family() {
  static const AttentionFamily family;
  return family;
}

}  // namespace fact::realize
