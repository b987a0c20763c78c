#include "bench/suite_chart.h"

#include "core/paths.h"
#include "core/process.h"

namespace fact::bench {

std::string draw_suite_chart(const std::filesystem::path& suite_json, const std::filesystem::path& png) {
  ProcessOptions po;
  po.env["PYTHONPATH"] = python_dir().string();
  po.env["MPLBACKEND"] = "Agg";  // no display on the machines that run suites
  po.timeout = std::chrono::seconds(300);
  auto r = run_process({python_exe(), "-m", "fact.bench.suite_chart", suite_json.string(), "-o", png.string()}, po);
  if (r.exit_code == 0) return "";
  std::string err = r.timed_out ? "timed out" : r.err;
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  if (auto nl = err.rfind('\n'); nl != std::string::npos) err = err.substr(nl + 1);
  return "chart not drawn: " + err;
}

}  // namespace fact::bench
