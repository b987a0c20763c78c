#include "bench/suite_metrics.h"

#include <algorithm>
#include <cmath>

namespace fact::bench {
namespace {

std::optional<double> fraction(int n, int d) {
  if (d == 0) return std::nullopt;
  return static_cast<double>(n) / d;
}

nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

}  // namespace

LevelMetrics level_metrics(const std::string& level, const std::vector<ProblemResult>& results) {
  LevelMetrics m;
  m.level = level;
  std::vector<int> fast_eager(kFastP.size(), 0), fast_compile(kFastP.size(), 0);
  double log_eager = 0, log_compile = 0;
  for (const auto& r : results) {
    ++m.problems;
    if (!r.measured()) {
      ++m.not_measured;
      continue;
    }
    ++m.measured;
    if (r.compile_default_ms) ++m.compile_measured;
    if (r.status == ProblemStatus::incorrect) ++m.incorrect;
    if (r.status == ProblemStatus::failed) ++m.failed;
    if (r.status != ProblemStatus::correct) continue;
    ++m.correct;
    auto se = r.speedup_eager(), sc = r.speedup_compile();
    for (size_t i = 0; i < kFastP.size(); ++i) {
      if (se && *se > kFastP[i]) ++fast_eager[i];
      if (sc && *sc > kFastP[i]) ++fast_compile[i];
    }
    if (se) {
      log_eager += std::log(*se);
      ++m.geomean_count_eager;
    }
    if (sc) {
      log_compile += std::log(*sc);
      ++m.geomean_count_compile;
    }
  }
  m.correct_fraction = fraction(m.correct, m.measured);
  for (size_t i = 0; i < kFastP.size(); ++i)
    m.fast_p.push_back({kFastP[i], fraction(fast_eager[i], m.measured), fraction(fast_compile[i], m.measured)});
  if (m.geomean_count_eager) m.geomean_speedup_eager = std::exp(log_eager / m.geomean_count_eager);
  if (m.geomean_count_compile) m.geomean_speedup_compile = std::exp(log_compile / m.geomean_count_compile);
  return m;
}

std::vector<LevelMetrics> suite_metrics(const std::vector<ProblemResult>& results) {
  std::vector<std::string> levels;
  for (const auto& r : results)
    if (std::find(levels.begin(), levels.end(), r.level) == levels.end()) levels.push_back(r.level);
  std::vector<LevelMetrics> out;
  for (const auto& level : levels) {
    std::vector<ProblemResult> of_level;
    for (const auto& r : results)
      if (r.level == level) of_level.push_back(r);
    out.push_back(level_metrics(level, of_level));
  }
  out.push_back(level_metrics("all", results));
  return out;
}

nlohmann::json to_json(const LevelMetrics& m) {
  nlohmann::json fast = nlohmann::json::object();
  for (const auto& f : m.fast_p) {
    std::string key = "fast_" + nlohmann::json(f.p).dump();
    fast[key] = {{"vs_eager", optional_json(f.vs_eager)}, {"vs_compile", optional_json(f.vs_compile)}};
  }
  return {{"level", m.level},
          {"problems", m.problems},
          {"measured", m.measured},
          {"correct", m.correct},
          {"incorrect", m.incorrect},
          {"failed", m.failed},
          {"not_measured", m.not_measured},
          {"compile_measured", m.compile_measured},
          {"correct_fraction", optional_json(m.correct_fraction)},
          {"fast_p", fast},
          {"geomean_speedup_eager", optional_json(m.geomean_speedup_eager)},
          {"geomean_count_eager", m.geomean_count_eager},
          {"geomean_speedup_compile", optional_json(m.geomean_speedup_compile)},
          {"geomean_count_compile", m.geomean_count_compile}};
}

}  // namespace fact::bench
