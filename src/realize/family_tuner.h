#pragma once
// The auto-tuner of every kernel family: the family's config space and rendered kernels fed to the shared
// tuning pipeline (candidate_tuner.h): options, outcome and winning rule are the same for all.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "realize/candidate_tuner.h"
#include "realize/kernel_family.h"
#include "realize/tuning_db.h"

namespace fact::realize {

// The measurement request for `python -m fact.realize.measure` (exposed for tests).
nlohmann::json family_measure_request(const KernelFamily& family, const nlohmann::json& problem,
                                      const BuiltLibraries& libraries);

TuneOutcome tune_family(const KernelFamily& family, const std::string& pattern, const nlohmann::json& problem,
                        TuningDb& db, const TuneOptions& options);

// planned_build_jobs for a family's problem.
PlannedBuilds planned_build_jobs(const KernelFamily& family, const std::string& pattern,
                                 const nlohmann::json& problem, TuningDb& db, const TuneOptions& options);

}  // namespace fact::realize
