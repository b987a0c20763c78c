#pragma once
// The GPUs this host shows, so `fact bench` can run one worker per GPU.
#include <string>
#include <vector>

namespace fact::bench {

// CUDA_VISIBLE_DEVICES when set (its comma-separated entries; empty means none), else the indices
// `nvidia-smi -L` lists; empty on a machine without an NVIDIA driver.
std::vector<std::string> visible_gpus();

// The entries of a CUDA_VISIBLE_DEVICES value ("0,1", "GPU-uuid", "" -> none).
std::vector<std::string> parse_visible_devices(const std::string& value);

}  // namespace fact::bench
