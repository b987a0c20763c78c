#include "realize/toolchain.h"

#include <cstdlib>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "core/process.h"
#include "realize/kernel_builder.h"
#include "realize/nvcc_command.h"

namespace fact::realize {

std::string cutlass_version() {
  static std::string cached;
  if (!cached.empty()) return cached;
  auto path = cutlass_dir() / "include" / "cutlass" / "version.h";
  std::string text = read_text_file(path, "CUTLASS version header");
  std::string parts[3];
  const char* names[3] = {"CUTLASS_MAJOR", "CUTLASS_MINOR", "CUTLASS_PATCH"};
  for (int i = 0; i < 3; ++i) {
    std::smatch m;
    if (!std::regex_search(text, m, std::regex(std::string("#define\\s+") + names[i] + "\\s+(\\d+)")))
      throw Error(path.string() + " has no " + names[i] + "; is CUTLASS_DIR a CUTLASS source root?");
    parts[i] = m[1];
  }
  return cached = parts[0] + "." + parts[1] + "." + parts[2];
}

std::string nvcc_version_text() {
  static std::string cached;
  if (cached.empty()) cached = compiler_version({nvcc_exe(), "--version"});
  return cached;
}

std::string nvcc_version() {
  std::smatch m;
  std::string text = nvcc_version_text();
  if (std::regex_search(text, m, std::regex("release (\\d+\\.\\d+)"))) return m[1];
  throw Error("cannot read the CUDA release from `nvcc --version`: " + text);
}

std::string visible_gpu_name() {
  static const std::string cached = [] {
    std::vector<std::string> argv = {"nvidia-smi", "--query-gpu=name", "--format=csv,noheader"};
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
      std::string first = std::string(v).substr(0, std::string(v).find(','));
      if (first.empty() || first[0] == '-') return std::string();  // no device visible
      argv.push_back("--id=" + first);  // an index or a UUID, as CUDA takes them
    }
    ProcessOptions po;
    po.timeout = std::chrono::seconds(30);
    ProcessResult r;
    try {
      r = run_process(argv, po);
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

}  // namespace fact::realize
