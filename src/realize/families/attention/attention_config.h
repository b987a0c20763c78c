#pragma once
// One attention kernel configuration in FlashAttention-2 terms: which kernel (its template), the CTA's query
// tile (block_m), the K/V tile it streams (block_n) and its warps, plus the traits the kernel is specialized on
// (element, numerics, head dim, arch). The kernels and their axes are data/families/attention.json's "kernels":
// sm80_mma (templates/cute/attention_fwd.cu.in), sm90_wgmma (templates/cute/attention_fwd_sm90.cu.in) and
// sm90_tma_ws (templates/cute/attention_fwd_sm90_ws.cu.in, whose `warps` counts consumer warps: its CTA adds a
// producer warpgroup of 128 threads).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "realize/families/attention/attention_problem.h"

namespace fact::realize {

// The kernel a config renders: mma.sync on sm80+ (every numerics mode), or Hopper's warpgroup MMA (16-bit modes)
// with cp.async loads by all threads or with TMA loads by a producer warpgroup (warp specialization).
enum class AttentionKernel { sm80_mma, sm90_wgmma, sm90_tma_ws };
std::string to_string(AttentionKernel k);  // "sm80_mma", "sm90_wgmma", "sm90_tma_ws"
AttentionKernel attention_kernel_from_string(const std::string& s);

struct AttentionConfig {
  AttentionKernel kernel = AttentionKernel::sm80_mma;
  Arch arch = Arch::sm90;
  Element element = Element::f32;
  Numerics numerics = Numerics::tf32;
  int head_dim = 64;
  int block_m = 128, block_n = 64, warps = 4;

  // Q tile plus kv_stages K and V tiles plus padding, in bytes.
  int64_t smem_bytes(int kv_stages, int padding_bytes = 0) const;
  std::string id() const;       // "attn_" + 12 hex digits
  std::string summary() const;  // e.g. "sm90 attention tf32 d96 m128 n64 w4 sm80_mma"
  std::string template_name() const;  // the kernel's template under templates/
  nlohmann::json to_json() const;
  static AttentionConfig from_json(const nlohmann::json& j);
};

// Why the config cannot run the problem, or empty when it can.
std::string attention_config_rejection(const AttentionProblem& problem, const AttentionConfig& config);

struct AttentionConfigSpace {
  int enumerated = 0;
  std::vector<AttentionConfig> ranked;
};
// Every kernel of data/families/attention.json that takes the problem's arch and numerics, each over its own
// axes, filtered by shared memory, head dim and rows per warp, ranked by wave quantization of the (query tiles x
// batch x heads) grid and work skipped under the causal mask. Every kernel's candidates are kept (each kernel's
// best first, alternating) so that a short top_n still measures each kernel that applies.
AttentionConfigSpace enumerate_attention_configs(const AttentionProblem& problem, int top_n);

}  // namespace fact::realize
