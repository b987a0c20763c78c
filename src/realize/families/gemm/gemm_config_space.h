#pragma once
// The candidate GEMM kernels for one problem: enumerated down CUTLASS's hierarchy (instruction ->
// warp/threadblock -> stages -> cluster/schedule -> swizzle -> split-K), pruned by what CUTLASS can
// take, ranked by a simple cost estimate. The tuner measures the top-N; nothing here touches a GPU.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "realize/families/gemm/gemm_config.h"
#include "realize/families/gemm/gemm_problem.h"

namespace fact::realize {

struct GemmSpaceOptions {
  int top_n = 16;                // kernels (distinct builds), each with its run-time variants
  int max_variants_per_kernel = 8;  // 3.x knobs (swizzle, raster, splits, reduction) measured per build
  int sm_count = 0;              // 0: the problem arch's (data/arch)
  int smem_capacity_bytes = 0;   // 0: the arch's limit (sm80 164 KB, sm90 227 KB)
  bool cutlass2_on_sm90 = true;  // offer sm80-generation kernels compiled for sm_90a
};

struct RankedGemmConfig {
  GemmConfig config;
  double score = 0;              // higher is better; wave_efficiency * tile_efficiency * kernel factors
  double wave_efficiency = 0;    // busy CTA slots / launched CTA slots over all waves
  double tile_efficiency = 0;    // useful MNK / MNK the tiles cover
};

struct GemmConfigSpace {
  std::vector<RankedGemmConfig> ranked;     // best first: the variants of at most top_n kernels
  int enumerated = 0;                       // before pruning
  std::map<std::string, int> pruned;        // reason -> how many configs it removed
};

// Dynamic shared memory one CTA may use on `arch`.
int smem_capacity_bytes(Arch arch);

// All valid, ranked candidates. Throws Error (naming the problem and the commonest pruning reason)
// when none survives, e.g. bf16 with an odd leading dimension.
GemmConfigSpace enumerate_gemm_configs(const GemmProblem& problem, const GemmSpaceOptions& options = {});

// Why CUTLASS cannot run `config` on `problem` (a sentence with the fix), or nullopt when it can.
// The same checks prune the enumeration; the code generator calls it before rendering.
std::optional<std::string> gemm_config_rejection(const GemmProblem& problem, const GemmConfig& config,
                                                 int smem_capacity = 0);

// The cost estimate used for ranking, exposed for the cost model and tests.
RankedGemmConfig estimate_gemm_config(const GemmProblem& problem, const GemmConfig& config, int sm_count);

}  // namespace fact::realize
