#pragma once
// The GPUs this host shows: `fact bench` runs one worker per GPU; the tuner names the GPU it measures on.
#include <string>
#include <vector>

namespace fact {

// CUDA_VISIBLE_DEVICES when set (its comma-separated entries; empty means none), else the indices
// `nvidia-smi -L` lists; empty on a machine without an NVIDIA driver.
std::vector<std::string> visible_gpus();

// The entries of a CUDA_VISIBLE_DEVICES value ("0,1", "GPU-uuid", "" -> none).
std::vector<std::string> parse_visible_devices(const std::string& value);

// The name of the first visible GPU, as nvidia-smi and torch.cuda.get_device_name() give it, e.g.
// "NVIDIA H100 80GB HBM3"; "" without a GPU or nvidia-smi.
std::string visible_gpu_name();

}  // namespace fact
