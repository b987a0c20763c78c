#pragma once
// A kernel family with a typed problem and config states its parts (FamilyParts: how a match becomes a problem,
// its config space, kernel, op and composed call); TypedKernelFamily turns them into the KernelFamily seam,
// where problems and configs are JSON, once for every such family.
//
// Problem: from_json / to_json, the JSON holding "element", "numerics" and "arch".
// Config: from_json / to_json, id(), summary(), arch.
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "realize/config_ranking.h"
#include "realize/kernel_family.h"

namespace fact::realize {

template <class Problem, class Config>
struct FamilyParts {
  const char* name;             // as in the rules and data/families/<name>.json
  const char* workload_layout;  // the tuning key's layout field ("row", "bhsd")
  // Throws Error naming the match and the reason when the family's kernel cannot take it.
  Problem (*problem_from_match)(const discover::Match&, const ir::Graph&, Numerics, Arch);
  ConfigSpace<Config> (*config_space)(const Problem&, int top_n);
  GeneratedSource (*kernel)(const Config&);
  std::string (*op_schema)(const Config&);
  GeneratedSource (*op_wrapper)(const Config&);
  OpCall (*op_call)(const OpCallSite&);
  // The op's returns (KernelFamily::op_returns); nullptr: the anchor's value only.
  std::vector<std::string> (*op_returns)(const nlohmann::json& config) = nullptr;
  // KernelFamily::channels_last; nullptr: none.
  ChannelsLast (*channels_last)(const Problem&, const Config&) = nullptr;
  // KernelFamily::in_channels_last_chain; nullptr: the problem as it is.
  Problem (*in_channels_last_chain)(Problem) = nullptr;
};

template <class Problem, class Config>
class TypedKernelFamily final : public KernelFamily {
 public:
  explicit TypedKernelFamily(FamilyParts<Problem, Config> parts) : parts_(parts) {}

  std::string name() const override { return parts_.name; }

  nlohmann::json problem_from_match(const discover::Match& m, const ir::Graph& g, Numerics numerics,
                                    Arch arch) const override {
    return parts_.problem_from_match(m, g, numerics, arch).to_json();
  }

  // The problem's JSON is the key's shape; its element, numerics and arch are the key's dtype, numerics, arch.
  WorkloadKey workload_key(const std::string& pattern, const nlohmann::json& problem) const override {
    const nlohmann::json p = Problem::from_json(problem).to_json();
    return make_workload_key(pattern, p, p.at("element").get<std::string>(), parts_.workload_layout,
                             p.at("numerics").get<std::string>(), p.at("arch").get<std::string>());
  }

  CandidateSet candidates(const nlohmann::json& problem, int top_n) const override {
    CandidateSet out;
    for (const Config& c : parts_.config_space(Problem::from_json(problem), top_n).ranked)
      out.ranked.push_back(candidate(c));
    out.space = fmt::format("{} config space: {} candidates kept after pruning and ranking", parts_.name,
                            out.ranked.size());
    return out;
  }

  FamilyCandidate candidate_from_config(const nlohmann::json& config) const override {
    return candidate(Config::from_json(config));
  }

  // What the family's Python case parses: the problem's JSON with its element as "dtype", without the arch.
  nlohmann::json measure_problem(const nlohmann::json& problem) const override {
    nlohmann::json j = Problem::from_json(problem).to_json();
    j["dtype"] = j.at("element");
    j.erase("element");
    j.erase("arch");
    return j;
  }

  std::string op_wrapper(const nlohmann::json& config) const override {
    return parts_.op_wrapper(Config::from_json(config)).text;
  }

  std::string op_schema(const nlohmann::json& config) const override {
    return parts_.op_schema(Config::from_json(config));
  }

  nlohmann::json manifest_fields(const nlohmann::json& config) const override {
    return {{"element", config.value("element", std::string("unknown"))}};
  }

  OpCall op_call(const OpCallSite& site) const override { return parts_.op_call(site); }

  std::vector<std::string> op_returns(const nlohmann::json& config) const override {
    return parts_.op_returns ? parts_.op_returns(config) : KernelFamily::op_returns(config);
  }

  nlohmann::json in_channels_last_chain(const nlohmann::json& problem) const override {
    return parts_.in_channels_last_chain ? parts_.in_channels_last_chain(Problem::from_json(problem)).to_json()
                                         : problem;
  }

  ChannelsLast channels_last(const nlohmann::json& problem, const nlohmann::json& config) const override {
    return parts_.channels_last ? parts_.channels_last(Problem::from_json(problem), Config::from_json(config))
                                : ChannelsLast{};
  }

 private:
  FamilyCandidate candidate(const Config& c) const { return {c.id(), c.to_json(), c.summary(), c.arch, parts_.kernel(c), ""}; }

  FamilyParts<Problem, Config> parts_;
};

// Registers a typed family (each family's family.cpp, at static initialization).
template <class Problem, class Config>
bool register_typed_family(FamilyParts<Problem, Config> parts) {
  return register_kernel_family(std::make_unique<TypedKernelFamily<Problem, Config>>(parts));
}

}  // namespace fact::realize
