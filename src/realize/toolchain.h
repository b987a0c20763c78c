#pragma once
// Versions of the tools a kernel depends on: they key the tuning database and the build cache.
#include <string>

namespace fact::realize {

std::string cutlass_version();  // "4.2.0", read from cutlass/version.h under fact::cutlass_dir()
std::string nvcc_version();     // "13.0", from `nvcc --version`; throws Error if nvcc cannot run
std::string nvcc_version_text();// the whole `nvcc --version` output (for the build cache key)

}  // namespace fact::realize
