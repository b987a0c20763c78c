// The attention family behind the KernelFamily seam: sdpa_attention / sdpa_attention_manual matches to
// kernels rendered from templates/cute/attention_fwd.cu.in (mma.sync) or attention_fwd_sm90.cu.in (wgmma).
#include <fmt/format.h>

#include "compose/python_expr.h"
#include "realize/kernel_family.h"

#include "realize/candidate_tuner.h"
#include "realize/families/attention/attention_codegen.h"
#include "realize/families/attention/attention_config.h"
#include "realize/families/attention/attention_problem.h"

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

  CandidateSet candidates(const nlohmann::json& problem, int top_n) const override {
    CandidateSet out;
    for (const auto& c : enumerate_attention_configs(AttentionProblem::from_json(problem), top_n).ranked)
      out.ranked.push_back(candidate(c));
    out.space = fmt::format("attention config space: {} candidates kept after pruning and ranking", out.ranked.size());
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

  std::string op_wrapper(const nlohmann::json& config) const override {
    return generate_attention_op_wrapper(AttentionConfig::from_json(config)).text;
  }

  std::string op_schema(const nlohmann::json& config) const override {
    return attention_op_schema(AttentionConfig::from_json(config));
  }

  nlohmann::json manifest_fields(const nlohmann::json& config) const override {
    return {{"element", config.value("element", std::string("unknown"))}};
  }

  // q, k, v as the module's views (read in place through their strides; for grouped-query attention the rule
  // binds K/V before their expand, so heads_kv < heads). O is the [B, H, T, D] view of a [B, T, H, D] tensor,
  // so the module's following transpose(1, 2).contiguous() copies nothing.
  OpCall op_call(const OpCallSite& s) const override {
    return {"", fmt::format("{}({}, {}, {}, {}, {})", s.op, s.tensor("q", true), s.tensor("k", true),
                            s.tensor("v", true), compose::python_float(s.scalar("scale", false).get<double>()),
                            s.scalar("causal", true).get<bool>() ? "True" : "False")};
  }

 private:
  static FamilyCandidate candidate(const AttentionConfig& c) {
    return {c.id(), c.to_json(), c.summary(), c.arch, generate_attention_kernel(c)};
  }
};

}  // namespace

const bool registered = register_kernel_family(std::make_unique<AttentionFamily>());

}  // namespace fact::realize
