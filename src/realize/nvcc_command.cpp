#include "realize/nvcc_command.h"

#include <cstdlib>

#include "realize/kernel_abi_header.h"

namespace fact::realize {
namespace fs = std::filesystem;

std::string nvcc_exe() {
  if (const char* v = std::getenv("FACT_NVCC"); v && *v) return v;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home && fs::exists(fs::path(home) / "bin" / "nvcc"))
    return (fs::path(home) / "bin" / "nvcc").string();
  if (fs::exists("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  return "nvcc";
}

std::string nvcc_gencode(Arch arch) {
  return arch == Arch::sm90 ? "-gencode=arch=compute_90a,code=sm_90a" : "-gencode=arch=compute_80,code=sm_80";
}

std::vector<std::string> nvcc_command(const GemmConfig& config, const fs::path& source, const fs::path& output,
                                      const fs::path& cutlass_dir, NvccOutput kind, const fs::path& abi_include_dir) {
  return nvcc_command(config.arch, source, output, cutlass_dir, kind, abi_include_dir);
}

std::vector<std::string> nvcc_command(Arch arch, const fs::path& source, const fs::path& output,
                                      const fs::path& cutlass_dir, NvccOutput kind, const fs::path& abi_include_dir) {
  std::vector<std::string> argv = {
      nvcc_exe(), "-std=c++17", "-O3", "--expt-relaxed-constexpr", nvcc_gencode(arch),
      "-DNDEBUG",
      // CUTLASS's own CMake defines this for every tensor-core kernel it builds.
      "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1",
      "-I" + (cutlass_dir / "include").string(), "-I" + (cutlass_dir / "tools" / "util" / "include").string(),
      "-I" + (abi_include_dir.empty() ? kernel_abi_include_dir() : abi_include_dir).string(),
      "-Xcompiler=-fPIC"};
  if (kind == NvccOutput::shared_library) argv.push_back("-shared");
  else argv.push_back("-c");
  argv.push_back(source.string());
  argv.push_back("-o");
  argv.push_back(output.string());
  return argv;
}

}  // namespace fact::realize
