#pragma once
// One step of `fact optimize`, run in this process: what the stage prints goes to its log file as it happens (and,
// for the stages whose table the user reads, to the console too), an Error it throws fails the step and is shown,
// and the step is timed. The step joins report.json's "steps" list and process.step_seconds.
#include <chrono>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace fact::pipeline {

// A stage's body: its table to `out`, its progress to `log`.
using StageBody = std::function<void(std::ostream& out, std::ostream& log)>;

struct StageStep {
  int index = 0;              // "[index/5]" in the console header
  std::string title;          // "discover: trace, match, rank"; up to the colon it names the step in step_seconds
  std::filesystem::path log;  // the stage's log file, written afresh
  bool echo = false;          // also show what the stage prints to `out` on the console
};

// Runs `body`; returns whether it finished without an exception. Appends {"step", "ok", "log", "seconds"} to
// `steps`; a failure's message goes to the log and, shortened, to `console_err`.
bool run_stage(const StageStep& step, const StageBody& body, nlohmann::json& steps, std::ostream& console_out,
               std::ostream& console_err);

// Seconds since `start`, for timing steps.
double seconds_since(std::chrono::steady_clock::time_point start);

}  // namespace fact::pipeline
