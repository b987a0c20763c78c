#pragma once
// The GEMM auto-tuner: the GEMM config space and code generation fed to the shared tuning pipeline
// (candidate_tuner.h), with 3xTF32's accuracy promise checked on every verified candidate.
#include <string>

#include "realize/candidate_tuner.h"
#include "realize/gemm_problem.h"
#include "realize/tuning_db.h"

namespace fact::realize {

WorkloadKey gemm_workload_key(const std::string& pattern, const GemmProblem& problem);

TuneOutcome tune_gemm(const std::string& pattern, const GemmProblem& problem, TuningDb& db, const TuneOptions& options);

}  // namespace fact::realize
