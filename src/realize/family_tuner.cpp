#include "realize/family_tuner.h"

#include <fmt/format.h>

#include "realize/kernel_build_job.h"

namespace fact::realize {
namespace fs = std::filesystem;
using nlohmann::json;

json family_measure_request(const KernelFamily& family, const json& problem, const BuiltLibraries& libraries) {
  json cands = json::array();
  for (auto& [id, lib] : libraries) cands.push_back({{"id", id}, {"library", fs::absolute(lib).string()}});
  return {{"family", family.name()}, {"problem", family.measure_problem(problem)}, {"candidates", cands},
          {"trials", 3}, {"baseline", true}};
}

namespace {

// The subject's functions refer to `family` and `problem`, which outlive it at every call site.
TuneSubject family_subject(const KernelFamily& family, const std::string& pattern, const json& problem) {
  TuneSubject s;
  s.key = family.workload_key(pattern, problem);
  s.candidates = [&](int top_n, std::string& space_line) {
    CandidateSet set = family.candidates(problem, top_n);
    std::vector<TuneCandidate> out;
    for (auto& fc : set.ranked) {
      TuneCandidate c;
      c.config_id = fc.config_id;
      c.config = fc.config;
      if (fc.rejected.empty()) c.job = kernel_build_job(fc);
      else c.rejected = fc.rejected;
      out.push_back(std::move(c));
    }
    space_line = set.space;
    return out;
  };
  s.rebuild = [&](const json& config) { return kernel_build_job(family.candidate_from_config(config)); };
  // data/families/<name>.json: the problem fields (JSON pointers) another batch changes.
  for (const auto& field : family_data(family.name()).value("neighbour_shape_fields", json::array()))
    s.free_shape_fields.push_back(field.get<std::string>());
  s.measure_request = [&](const BuiltLibraries& libraries) { return family_measure_request(family, problem, libraries); };
  s.accuracy_shortfall = [&](const CandidateRecord& rec, const TuneOutcome& so_far) {
    return family.accuracy_shortfall(problem, rec, so_far);
  };
  return s;
}

}  // namespace

TuneOutcome tune_family(const KernelFamily& family, const std::string& pattern, const json& problem, TuningDb& db,
                        const TuneOptions& o) {
  return tune_candidates(family_subject(family, pattern, problem), db, o);
}

std::optional<BuildJob> recorded_winner_job(const KernelFamily& family, const std::string& pattern,
                                            const json& problem, TuningDb& db, const TuneOptions& o) {
  return recorded_winner_job(family_subject(family, pattern, problem), db, o);
}

}  // namespace fact::realize
