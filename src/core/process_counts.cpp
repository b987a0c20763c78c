#include "core/process_counts.h"

#include <mutex>


namespace fact {
using nlohmann::json;

namespace {

std::mutex& counts_mutex() {
  static std::mutex m;
  return m;
}
ProcessCounts& counts() {
  static ProcessCounts c;
  return c;
}

}  // namespace

json ProcessCounts::to_json() const {
  json compiled = json::object();
  for (const auto& [id, n] : compiles) compiled[id] = n;
  json steps = json::object();
  for (const auto& [step, s] : step_seconds) steps[step] = static_cast<double>(static_cast<long long>(s * 100 + 0.5)) / 100;
  return {{"python_starts", python_starts},
          {"python_starts_by_use", python_starts_by_use},
          {"fact_starts", fact_starts},
          {"compiles", compiled},
          {"step_seconds", steps}};
}

void note_python_start(const std::string& use, int starts) {
  if (starts <= 0) return;
  std::lock_guard<std::mutex> lock(counts_mutex());
  counts().python_starts += starts;
  counts().python_starts_by_use[use] += starts;
}

void note_fact_start() {
  std::lock_guard<std::mutex> lock(counts_mutex());
  ++counts().fact_starts;
}

void note_kernel_build(const std::string& kernel_id, bool compiled) {
  std::lock_guard<std::mutex> lock(counts_mutex());
  counts().compiles[kernel_id] += compiled ? 1 : 0;
}

void note_step_seconds(const std::string& step, double seconds) {
  std::lock_guard<std::mutex> lock(counts_mutex());
  counts().step_seconds[step] += seconds;
}

ProcessCounts process_counts() {
  std::lock_guard<std::mutex> lock(counts_mutex());
  return counts();
}

}  // namespace fact
