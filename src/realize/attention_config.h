#pragma once
// One attention kernel configuration in FlashAttention-2 terms: the CTA's query tile (block_m), the K/V
// tile it streams (block_n) and its warps, plus the traits the kernel is specialized on (element,
// numerics, head dim, arch). The kernel template is templates/cute/attention_fwd.cu.in.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "realize/attention_problem.h"

namespace fact::realize {

struct AttentionConfig {
  Arch arch = Arch::sm90;
  Element element = Element::f32;
  Numerics numerics = Numerics::tf32;
  int head_dim = 64;
  int block_m = 128, block_n = 64, warps = 4;

  // Q tile plus kv_stages K and V tiles, in bytes.
  int64_t smem_bytes(int kv_stages) const;
  std::string id() const;       // "attn_" + 12 hex digits
  std::string summary() const;  // e.g. "sm90 attention tf32 d96 m128 n64 w4"
  nlohmann::json to_json() const;
  static AttentionConfig from_json(const nlohmann::json& j);
};

// Why the config cannot run the problem, or empty when it can.
std::string attention_config_rejection(const AttentionProblem& problem, const AttentionConfig& config);

struct AttentionConfigSpace {
  int enumerated = 0;
  std::vector<AttentionConfig> ranked;
};
// Axes from data/families/attention.json, filtered by shared memory and head dim, ranked by wave
// quantization of the (query tiles x batch x heads) grid and work skipped under the causal mask.
AttentionConfigSpace enumerate_attention_configs(const AttentionProblem& problem, int top_n);

}  // namespace fact::realize
