#pragma once
// Per-level scores of a suite, KernelBench's way: the fraction correct, fast_p (the fraction of problems
// that are correct AND faster than the baseline by more than p) and the geometric-mean speedup.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/problem_result.h"

namespace fact::bench {

inline const std::vector<double> kFastP = {1.0, 1.5, 2.0};

struct FastP {
  double p = 1.0;
  std::optional<double> vs_eager;    // over the measured problems; null when none was measured
  std::optional<double> vs_compile;  // counts only problems whose torch.compile time was measured
};

struct LevelMetrics {
  std::string level;                 // "level1", ..., or "all"
  int problems = 0;                  // every problem found
  int measured = 0;                  // correct + incorrect + failed: the denominator of the fractions
  int correct = 0, incorrect = 0, failed = 0;
  int not_measured = 0;              // no GPU, never started or interrupted: left out of every fraction
  int compile_measured = 0;          // measured problems that have a torch.compile time
  std::optional<double> correct_fraction;
  std::vector<FastP> fast_p;         // one per kFastP
  // Geometric means over the correct problems that have the speedup; null when there are none.
  std::optional<double> geomean_speedup_eager, geomean_speedup_compile;
  int geomean_count_eager = 0, geomean_count_compile = 0;
};

LevelMetrics level_metrics(const std::string& level, const std::vector<ProblemResult>& results);
// One entry per level in the order levels first appear, then "all".
std::vector<LevelMetrics> suite_metrics(const std::vector<ProblemResult>& results);

nlohmann::json to_json(const LevelMetrics& m);

}  // namespace fact::bench
