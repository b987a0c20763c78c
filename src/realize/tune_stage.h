#pragma once
// Stage 2 as one call: every pattern of a plan whose family is realized becomes tuned kernels (or stays with
// PyTorch, with the reason); results persist in the tuning database and come back as the tune report
// ("fact-tune-report"). `fact tune` and `fact optimize` both call it.
#include <chrono>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fact::realize {

struct TunePlanRequest {
  std::filesystem::path plan;      // written by the discover stage
  std::filesystem::path db;        // empty: $FACT_TUNING_DB or ~/.cache/fact/tuning.sqlite
  std::filesystem::path report;    // write the report here too; empty: do not
  std::filesystem::path work_dir;  // measurement requests and results
  std::string numerics;            // empty: the plan's
  int top = 8;                     // candidates built and measured per pattern
  unsigned jobs = 0;               // parallel compiles; 0: all cores
  bool force = false;              // tune again even where the database has a winner
  bool build_only = false;         // generate and compile, do not measure (no GPU needed)
  // 0: none. Once this many seconds have passed, patterns the database has no winner for are not tuned (they
  // stay PyTorch's, status over_budget); a pattern being tuned then finishes.
  std::chrono::seconds budget{0};
  std::vector<std::string> families;  // tune only these families' patterns; empty: every family
};

// The results table goes to `out`, progress (build bar, per-pattern lines) to `log`. Returns the report. A
// pattern that fails is a row with the reason; throws Error only for an unreadable plan or database.
nlohmann::json tune_plan(const TunePlanRequest& request, std::ostream& out, std::ostream& log);

}  // namespace fact::realize
