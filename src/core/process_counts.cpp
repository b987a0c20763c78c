#include "core/process_counts.h"

#include <cstdlib>
#include <mutex>

#include "core/files.h"

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

void ProcessCounts::add(const ProcessCounts& o) {
  python_starts += o.python_starts;
  for (const auto& [k, v] : o.python_starts_by_use) python_starts_by_use[k] += v;
  fact_starts += o.fact_starts;
  for (const auto& [k, v] : o.compiles) compiles[k] += v;
  for (const auto& [k, v] : o.step_seconds) step_seconds[k] += v;
}

ProcessCounts ProcessCounts::from_json(const json& j) {
  ProcessCounts c;
  if (!j.is_object()) return c;
  c.python_starts = j.value("python_starts", 0);
  c.fact_starts = j.value("fact_starts", 0);
  for (const char* key : {"python_starts_by_use", "compiles"}) {
    if (!j.contains(key) || !j[key].is_object()) continue;
    auto& into = std::string(key) == "compiles" ? c.compiles : c.python_starts_by_use;
    for (const auto& [k, v] : j[key].items())
      if (v.is_number_integer()) into[k] = v.get<int>();
  }
  if (j.contains("step_seconds") && j["step_seconds"].is_object())
    for (const auto& [k, v] : j["step_seconds"].items())
      if (v.is_number()) c.step_seconds[k] = v.get<double>();
  return c;
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

void add_process_counts(const ProcessCounts& other) {
  std::lock_guard<std::mutex> lock(counts_mutex());
  counts().add(other);
}

void write_process_counts_if_asked() {
  const char* path = std::getenv(kProcessCountsEnv);
  if (!path || !*path) return;
  try {
    write_file_atomic(path, process_counts().to_json().dump() + "\n");
  } catch (...) {  // the tally is a report detail: losing it must not change the command's outcome
  }
}

}  // namespace fact
