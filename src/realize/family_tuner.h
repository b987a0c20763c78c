#pragma once
// The auto-tuner for the non-GEMM kernel families, the same pipeline as tune_gemm: the family's config
// space -> rendered kernels -> parallel nvcc (content-hash cache) -> the Python runner on the GPU
// (verify vs float64, time vs PyTorch's ops in the same numerics) -> tuning database. Options, outcome
// and the winning rule (verified, and faster than PyTorch by the margin) are the GEMM tuner's.
#include <string>

#include <nlohmann/json.hpp>

#include "realize/gemm_tuner.h"
#include "realize/kernel_family.h"
#include "realize/tuning_db.h"

namespace fact::realize {

using FamilyTuneOptions = GemmTuneOptions;
using FamilyTuneOutcome = GemmTuneOutcome;

// The measurement request for `python -m fact.realize.measure` (exposed for tests).
nlohmann::json family_measure_request(const KernelFamily& family, const nlohmann::json& problem,
                                      const std::vector<std::pair<std::string, std::filesystem::path>>& libraries);

FamilyTuneOutcome tune_family(const KernelFamily& family, const std::string& pattern, const nlohmann::json& problem,
                              TuningDb& db, const FamilyTuneOptions& options);

}  // namespace fact::realize
