#pragma once
// One check for the op wrappers' tests: an op library source is built on the GPU machine, so here it is only
// parsed (g++ -fsyntax-only) against the venv's torch headers, CUDA's and the kernel ABI header's folder.
#include <filesystem>
#include <string>

#include "core/paths.h"
#include "core/process.h"

// The venv's torch package folder, or "" when torch with its headers is not installed there (the test skips).
inline std::string torch_package_dir() {
  auto where = fact::run_process({fact::python_exe(), "-c",
                                  "import importlib.util, os; s = importlib.util.find_spec('torch'); "
                                  "print(os.path.dirname(s.origin) if s else '')"});
  std::string dir = where.out.substr(0, where.out.find('\n'));
  if (where.exit_code != 0 || dir.empty() || !std::filesystem::exists(std::filesystem::path(dir) / "include")) return "";
  return dir;
}

inline fact::ProcessResult parse_against_torch(const std::string& torch_dir, const std::filesystem::path& cpp,
                                               const std::filesystem::path& abi_include) {
  std::filesystem::path inc = std::filesystem::path(torch_dir) / "include";
  return fact::run_process({"g++", "-std=c++17", "-fsyntax-only", "-I" + inc.string(),
                            "-I" + (inc / "torch" / "csrc" / "api" / "include").string(), "-I/usr/local/cuda/include",
                            "-I" + abi_include.string(), cpp.string()});
}
