#pragma once
// The suite's report: suite.json (every problem and the per-level metrics) and suite.md (the same as tables).
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/problem_result.h"

namespace fact::bench {

struct SuiteInfo {
  std::string suite_dir, arch, numerics;  // numerics empty: each problem's default
  int top = 0, jobs = 1;
  std::vector<std::string> gpus;
  std::string conv_numerics;  // empty: tf32, PyTorch's cuDNN default
};

nlohmann::json suite_json(const SuiteInfo& info, const std::vector<ProblemResult>& results);
std::string suite_markdown(const nlohmann::json& suite);
// Writes OUT/suite.json and OUT/suite.md (atomically).
void write_suite_report(const std::filesystem::path& out, const SuiteInfo& info, const std::vector<ProblemResult>& results);

}  // namespace fact::bench
