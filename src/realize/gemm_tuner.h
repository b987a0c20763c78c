#pragma once
// The GEMM auto-tuner: config space -> code generation -> parallel build -> measurement (the Python
// runner on the GPU) -> tuning database. A recorded winner is reused without rebuilding or measuring.
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "realize/gemm_problem.h"
#include "realize/kernel_builder.h"
#include "realize/tuning_db.h"

namespace fact::realize {

struct GemmTuneOptions {
  int top_n = 8;                      // candidates built and measured
  unsigned jobs = 0;                  // parallel compiles; 0: all cores
  bool force = false;                 // ignore a recorded winner and tune again
  bool measure = true;                // false: generate and build only (no GPU needed)
  std::filesystem::path work_dir;     // measurement requests and results go here
  std::function<void(const std::string&)> log;  // one line per step
  BuildProgressFn on_build_progress;
};

struct GemmTuneOutcome {
  // tuned: measured now, a FACT kernel won; baseline_kept: measured, PyTorch was faster or no
  // candidate verified; cached: winner read from the database; built: built, not measured (asked);
  // needs_gpu: built, but measuring needs a CUDA GPU; no_candidate: no config can take the problem.
  std::string status;
  std::string message;
  WorkloadKey key;
  long long workload_id = 0;
  std::string winner;                 // config id, kBaselineWinner, or empty
  nlohmann::json winner_config;       // null unless a FACT kernel won
  std::filesystem::path library;      // the winner's built library
  std::optional<double> fact_ms, baseline_ms, rel_err, baseline_rel_err, fp32_reference_err;
  std::string baseline_name;
  int candidates = 0, built = 0, verified = 0;
  double seconds = 0;
  std::optional<double> speedup() const;
  nlohmann::json to_json() const;
};

WorkloadKey gemm_workload_key(const std::string& pattern, const GemmProblem& problem);

GemmTuneOutcome tune_gemm(const std::string& pattern, const GemmProblem& problem, TuningDb& db,
                          const GemmTuneOptions& options);

}  // namespace fact::realize
