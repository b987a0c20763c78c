#include "core/paths.h"

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/python_worker.h"

namespace fact {
namespace fs = std::filesystem;

static std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

fs::path fact_home() { return env_or("FACT_HOME", FACT_SOURCE_DIR); }
fs::path data_dir() { return fact_home() / "data"; }
fs::path templates_dir() { return fact_home() / "templates"; }
// An installed package keeps its data apart from site-packages, where the `fact` package is: fact/api/core.py
// sets both variables.
fs::path python_dir() { return env_or("FACT_PYTHON_DIR", (fact_home() / "python").string()); }
std::string python_exe() { return env_or("FACT_PYTHON", FACT_DEFAULT_PYTHON); }

fs::path cutlass_dir() {
  static fs::path cached;
  if (!cached.empty()) return cached;
  if (const char* v = std::getenv("CUTLASS_DIR"); v && *v) {
    fs::path p(v);
    if (!fs::exists(p / "include" / "cutlass" / "cutlass.h"))
      throw Error("CUTLASS_DIR=" + p.string() + " has no include/cutlass/cutlass.h; point it at a CUTLASS source root");
    return cached = p;
  }
  // Asked of the process's Python worker, which the pipeline starts anyway (python/fact/environment.py).
  auto r = run_python_module("fact.environment", {"--cutlass"}, std::chrono::seconds(120));
  std::string found, why = r.err;
  try {
    auto answer = nlohmann::json::parse(r.out);
    if (answer.value("cutlass_dir", nlohmann::json()).is_string()) found = answer["cutlass_dir"].get<std::string>();
    if (answer.value("cutlass_error", nlohmann::json()).is_string()) why = answer["cutlass_error"].get<std::string>();
  } catch (const nlohmann::json::exception&) {  // no answer: `why` holds what the worker said
  }
  if (r.exit_code != 0 || found.empty() || !fs::exists(fs::path(found) / "include" / "cutlass" / "cutlass.h"))
    throw Error("cannot find CUTLASS: set CUTLASS_DIR, or install the pinned nvidia-cutlass wheel into " +
                python_exe() + " (scripts/bootstrap does this)" + (why.empty() ? "" : "; " + why.substr(0, 500)));
  return cached = found;
}

}  // namespace fact
