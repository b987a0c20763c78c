#include "realize/family_tuner.h"

#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"
#include "realize/kernel_build_job.h"

namespace fact::realize {
namespace fs = std::filesystem;
using nlohmann::json;

json family_measure_request(const KernelFamily& family, const json& problem, const BuiltLibraries& libraries) {
  json cands = json::array();
  for (auto& b : libraries) {
    json c = {{"id", b.config_id}, {"library", fs::absolute(b.library).string()}};
    if (b.kernel_id != b.config_id) c["kernel"] = b.kernel_id;  // a run-time variant of a shared kernel
    if (b.arguments.is_object() && !b.arguments.empty()) c["arguments"] = b.arguments;
    cands.push_back(std::move(c));
  }
  json request = {{"family", family.name()}, {"problem", family.measure_problem(problem)}, {"candidates", cands},
                  {"trials", 3}, {"baseline", true}};
  // A candidate that hangs waits out this limit (the runner's default 60 s otherwise); its kernel's other
  // variants are then skipped.
  if (const char* v = std::getenv("FACT_MEASURE_TIMEOUT_S"); v && *v) {
    char* end = nullptr;
    double s = std::strtod(v, &end);
    if (end == v || *end || !(s > 0))
      throw Error(fmt::format("FACT_MEASURE_TIMEOUT_S={:?} is not a positive number of seconds", v));
    request["timeout_s"] = s;
  }
  return request;
}

namespace {

TuneCandidate tune_candidate(const FamilyCandidate& fc) {
  TuneCandidate c;
  c.config_id = fc.config_id;
  c.config = fc.config;
  c.kernel_id = fc.kernel_id();
  c.arguments = fc.arguments;
  if (fc.rejected.empty()) c.job = kernel_build_job(fc);
  else c.rejected = fc.rejected;
  return c;
}

// The subject's functions refer to `family` and `problem`, which outlive it at every call site.
TuneSubject family_subject(const KernelFamily& family, const std::string& pattern, const json& problem) {
  TuneSubject s;
  s.key = family.workload_key(pattern, problem);
  s.candidates = [&](int top_n, std::string& space_line) {
    CandidateSet set = family.candidates(problem, top_n);
    std::vector<TuneCandidate> out;
    for (auto& fc : set.ranked) out.push_back(tune_candidate(fc));
    space_line = set.space;
    return out;
  };
  s.rebuild = [&](const json& config) { return tune_candidate(family.candidate_from_config(config)); };
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

PlannedBuilds planned_build_jobs(const KernelFamily& family, const std::string& pattern, const json& problem,
                                 TuningDb& db, const TuneOptions& o) {
  return planned_build_jobs(family_subject(family, pattern, problem), db, o);
}

}  // namespace fact::realize
