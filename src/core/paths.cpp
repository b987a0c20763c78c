#include "core/paths.h"

#include <cstdlib>

#include "core/error.h"
#include "core/process.h"

namespace fact {
namespace fs = std::filesystem;

static std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

fs::path fact_home() { return env_or("FACT_HOME", FACT_SOURCE_DIR); }
fs::path data_dir() { return fact_home() / "data"; }
fs::path templates_dir() { return fact_home() / "templates"; }
fs::path python_dir() { return fact_home() / "python"; }
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
  auto r = run_process({python_exe(), "-c",
                        "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source'))"});
  std::string out = r.out;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (r.exit_code != 0 || out.empty() || !fs::exists(fs::path(out) / "include" / "cutlass" / "cutlass.h"))
    throw Error("cannot find CUTLASS: set CUTLASS_DIR, or install the pinned nvidia-cutlass wheel into " +
                python_exe() + " (scripts/bootstrap does this)");
  return cached = out;
}

}  // namespace fact
