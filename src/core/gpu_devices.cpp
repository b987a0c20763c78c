#include "core/gpu_devices.h"

#include <cstdlib>
#include <sstream>

#include "core/error.h"
#include "core/process.h"

namespace fact {

std::vector<std::string> parse_visible_devices(const std::string& value) {
  std::vector<std::string> out;
  std::stringstream in(value);
  for (std::string item; std::getline(in, item, ',');) {
    auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos) continue;
    item = item.substr(b, e - b + 1);
    if (item.rfind("-", 0) == 0) break;  // CUDA stops at the first invalid (negative) entry
    out.push_back(item);
  }
  return out;
}

std::vector<std::string> visible_gpus() {
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) return parse_visible_devices(v);
  ProcessOptions po;
  po.timeout = std::chrono::seconds(60);
  ProcessResult r;
  try {
    r = run_process({"nvidia-smi", "-L"}, po);
  } catch (const Error&) {
    return {};  // no driver tools: a CPU machine
  }
  std::vector<std::string> gpus;
  if (r.exit_code != 0) return gpus;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("GPU ", 0) == 0) gpus.push_back(std::to_string(gpus.size()));
  return gpus;
}

std::string visible_gpu_name() {
  static const std::string cached = [] {
    auto gpus = visible_gpus();
    if (gpus.empty()) return std::string();
    ProcessOptions po;
    po.timeout = std::chrono::seconds(30);
    ProcessResult r;
    try {
      r = run_process({"nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "--id=" + gpus.front()}, po);
    } catch (const Error&) {
      return std::string();  // no driver tools: a CPU machine
    }
    if (r.exit_code != 0) return std::string();
    std::string line;
    std::getline(std::istringstream(r.out), line);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    return line;
  }();
  return cached;
}

}  // namespace fact
