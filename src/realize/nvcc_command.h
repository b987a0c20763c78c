#pragma once
// The nvcc command line that compiles one generated kernel; the kernel builder runs it.
#include <filesystem>
#include <string>
#include <vector>

#include "realize/families/gemm/gemm_config.h"

namespace fact::realize {

enum class NvccOutput { shared_library, object };

// $FACT_NVCC, else $CUDA_HOME/bin/nvcc, else /usr/local/cuda/bin/nvcc, else "nvcc" on PATH.
std::string nvcc_exe();
// -gencode for the config's arch: sm_80, or sm_90a (wgmma/TMA need the arch-specific target).
std::string nvcc_gencode(Arch arch);
// argv for nvcc: C++17, -O3, CUTLASS include dirs, the folder of the rendered kernel_abi.h, -fPIC, and -shared
// or -c. abi_include_dir empty: kernel_abi_include_dir() (kernel_abi_header.h), which it names by the header's
// hash, so the argv and the build cache key change with the header.
std::vector<std::string> nvcc_command(const GemmConfig& config, const std::filesystem::path& source,
                                      const std::filesystem::path& output, const std::filesystem::path& cutlass_dir,
                                      NvccOutput kind = NvccOutput::shared_library,
                                      const std::filesystem::path& abi_include_dir = {});
// The same for any kernel family: only the target arch differs between kernels.
std::vector<std::string> nvcc_command(Arch arch, const std::filesystem::path& source,
                                      const std::filesystem::path& output, const std::filesystem::path& cutlass_dir,
                                      NvccOutput kind = NvccOutput::shared_library,
                                      const std::filesystem::path& abi_include_dir = {});

}  // namespace fact::realize
