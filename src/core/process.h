#pragma once
// Runs a child program (python tracer, nvcc) without a shell, capturing its output, with a time limit.
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace fact {

struct ProcessOptions {
  std::filesystem::path cwd;                   // empty: inherit
  std::map<std::string, std::string> env;      // added to (or replacing in) the inherited environment
  std::chrono::seconds timeout{0};             // 0: no limit
};

struct ProcessResult {
  int exit_code = -1;       // -1 when killed by a signal or the time limit
  bool timed_out = false;
  int signal = 0;           // the signal that ended it (SIGABRT for std::terminate), 0 when it exited
  std::string out;          // stdout
  std::string err;          // stderr
};

// Throws Error only when the program cannot be started at all.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

}  // namespace fact
