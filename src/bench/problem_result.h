#pragma once
// One problem's outcome in a suite, read from the folder `fact optimize` wrote for it: report.json and,
// until report.json carries its own "e2e" object, the e2e.json beside it.
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/suite_problems.h"

namespace fact::bench {

// correct / incorrect / failed were measured on a GPU; not_measured had no GPU (report.json "needs_gpu");
// not_run was never started or was interrupted, so a resumed run starts it again.
enum class ProblemStatus { correct, incorrect, failed, not_measured, not_run };
std::string to_string(ProblemStatus s);
ProblemStatus problem_status_from_string(const std::string& s);  // throws Error on an unknown name

struct ProblemResult {
  std::string id, level, name, path;
  ProblemStatus status = ProblemStatus::not_run;
  std::string reason;                        // why it is not correct (or what was not measured)
  std::string numerics;
  std::optional<double> eager_ms, composed_ms;
  // Absent when torch.compile was not timed: never read as 0 or as eager.
  std::optional<double> compile_default_ms, compile_reduce_overhead_ms, compile_max_autotune_ms;
  std::optional<double> rel_err_composed, rel_err_original;
  std::optional<int> fact_patterns;          // patterns the composed module runs as FACT ops, when reported
  std::optional<int> fact_ops, graph_ops;    // graph ops inside those patterns / op nodes of the graph (views left out)
  double seconds = 0;                        // wall time of its `fact optimize`

  bool measured() const;                     // correct, incorrect or failed
  std::optional<double> speedup_eager() const;              // eager_ms / composed_ms
  std::optional<double> speedup_compile() const;            // compile_default_ms / composed_ms
  std::optional<double> speedup_compile_max_autotune() const;
};

nlohmann::json to_json(const ProblemResult& r);
ProblemResult problem_result_from_json(const nlohmann::json& j);  // throws on a malformed record

// Reads `fact optimize`'s output folder for `problem`. A missing or unreadable report.json is `failed`
// with the reason; the caller decides whether that was a crash (re-run on resume) or not.
ProblemResult read_problem_result(const SuiteProblem& problem, const std::filesystem::path& optimize_out);

}  // namespace fact::bench
