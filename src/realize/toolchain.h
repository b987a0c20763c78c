#pragma once
// Versions of the tools a kernel depends on: they key the tuning database and the build cache.
#include <string>

namespace fact::realize {

std::string cutlass_version();  // "4.2.0", read from cutlass/version.h under fact::cutlass_dir()
std::string nvcc_version();     // "13.0", from `nvcc --version`; throws Error if nvcc cannot run
std::string nvcc_version_text();// the whole `nvcc --version` output (for the build cache key)
// The name of the GPU measurements run on (the first of CUDA_VISIBLE_DEVICES), as nvidia-smi and
// torch.cuda.get_device_name() give it, e.g. "NVIDIA H100 80GB HBM3"; "" without a GPU or nvidia-smi.
std::string visible_gpu_name();

}  // namespace fact::realize
