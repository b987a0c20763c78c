#pragma once
// Runs `fact optimize` on every problem of a suite, one worker per GPU by default, each problem in its own
// output folder, skipping problems whose finished result is already there when resuming. More workers than
// GPUs overlap the problems' CPU work (tracing, nvcc); their GPU work is serialized by a lock per GPU.
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "bench/problem_result.h"
#include "bench/suite_problems.h"

namespace fact::bench {

struct SuiteRunOptions {
  std::filesystem::path out;                 // OUT/<level>/<name>/ per problem
  std::vector<std::string> optimize_command; // argv prefix, e.g. {"/path/fact", "optimize"}
  std::string arch = "sm90";
  std::string numerics;                      // empty: each problem's default
  std::string conv_numerics;                 // empty: tf32 (PyTorch's cuDNN default); 3xtf32: fp32-accurate
  int top = 6;
  int jobs = 1;
  std::vector<std::string> gpus;             // worker i gets CUDA_VISIBLE_DEVICES=gpus[i % size]; empty: untouched
  bool resume = false;
  std::chrono::seconds problem_timeout{0};   // 0: none; a problem past it is killed and counted failed
  std::chrono::seconds time_budget{0};       // 0: none; no problem starts after it (they stay not_run)
  std::map<std::string, std::string> env;    // added to every optimize's environment (e.g. FACT_TUNING_DB)
};

// Called under a lock after each problem finishes (or is skipped), with every result so far in suite
// order (not yet finished ones as not_run): lets the caller rewrite suite.json as the run goes.
using SuiteProgress = std::function<void(const std::vector<ProblemResult>& results)>;

std::vector<ProblemResult> run_suite(const std::vector<SuiteProblem>& problems, const SuiteRunOptions& options,
                                     std::ostream& log, const SuiteProgress& on_progress = {});

// The folder a problem's optimize writes to.
std::filesystem::path problem_out_dir(const std::filesystem::path& suite_out, const SuiteProblem& problem);
// A not_run result for `problem` with `reason`.
ProblemResult pending_result(const SuiteProblem& problem, const std::string& reason);

}  // namespace fact::bench
