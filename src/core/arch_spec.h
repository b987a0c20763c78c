#pragma once
// Per-architecture ceilings for the cost model (data/arch/<arch>.json).
#include <filesystem>
#include <map>
#include <string>

#include "core/vocabulary.h"

namespace fact {

struct ArchSpec {
  std::string name;              // sm80, sm90
  Arch arch = Arch::sm90;
  std::string device;            // e.g. "NVIDIA H100 80GB HBM3"
  int sm_count = 0;
  double dram_bytes_per_s = 0;   // measured copy bandwidth (read + write)
  double l2_bytes = 0;
  double smem_per_sm_bytes = 0;
  double launch_overhead_s = 0;  // per kernel launch
  // Dense matrix rates in FLOP/s, by numerics mode: fp32 (SIMT), tf32, 3xtf32, bf16, fp16.
  std::map<std::string, double> gemm_flops;
  double simt_flops = 0;         // non-matrix fp32 arithmetic
  std::string source;            // where the figures come from

  static ArchSpec load(const std::filesystem::path& path);
  static ArchSpec builtin(const std::string& arch);  // data_dir()/arch/<arch>.json; Error if unknown
  static const ArchSpec& of(Arch arch);               // builtin, read once
  // The dense matrix rate of a numerics mode; Error naming the file when it has none.
  double gemm_rate(Numerics numerics) const;
  // Named constant for rule constraints: "sm_count", "l2_bytes", ...; throws Error if unknown.
  double constant(const std::string& key) const;
};

// Busy CTA slots / launched CTA slots over all waves of `ctas` CTAs on `sm_count` SMs (1 when either is 0).
double wave_efficiency(double ctas, int sm_count);

}  // namespace fact
