#pragma once
// What one `fact` process started and compiled, for report.json's "process" block: how often Python and
// `fact` itself were started (each start costs seconds: Python imports torch), how often each kernel was
// compiled (a winner should be compiled once), and the seconds each pipeline step took. Process-wide and
// thread-safe, because the kernel builder compiles on several threads and every stage adds to the same tally.
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace fact {

struct ProcessCounts {
  int python_starts = 0;
  std::map<std::string, int> python_starts_by_use;  // "fact.trace", "measure worker", ... -> starts
  int fact_starts = 0;
  std::map<std::string, int> compiles;              // kernel id (config id) -> compiler runs (0: cache hit)
  std::map<std::string, double> step_seconds;       // pipeline step -> seconds, summed over repeats

  nlohmann::json to_json() const;
};

// One Python process started for `use` (a module name, or what the Python side started a child for).
void note_python_start(const std::string& use, int starts = 1);
void note_fact_start();
// A kernel the builder was asked for: `compiled` when the compiler ran, false for a cache hit (kept as 0, so the
// report lists every kernel that was needed, compiled or not).
void note_kernel_build(const std::string& kernel_id, bool compiled);
void note_step_seconds(const std::string& step, double seconds);
ProcessCounts process_counts();

}  // namespace fact
