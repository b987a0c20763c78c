#include "realize/toolchain.h"

#include <regex>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
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

}  // namespace fact::realize
