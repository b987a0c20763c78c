#pragma once
// The attention family: forward attention (the rules sdpa_attention / sdpa_attention_manual) as FlashAttention-2
// kernels, one per config. problem.cpp reads a match into an AttentionProblem; space.cpp has the AttentionConfig
// and its config space over the kernels of data/families/attention.json; family.cpp renders the config's kernel
// template and templates/cute/attention_op.cpp.in and registers the family.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/vocabulary.h"
#include "discover/match.h"
#include "ir/graph.h"
#include "realize/config_ranking.h"
#include "realize/head_strides.h"
#include "realize/template_renderer.h"

namespace fact::realize {

// SDPA's attn_mask: none, boolean (false masks the key) or additive (added to the scaled scores, in q's dtype).
enum class AttentionMask { none, boolean, additive };
std::string to_string(AttentionMask m);  // "none", "bool", "additive"

// One forward-attention workload: batch, heads (and K/V heads for grouped-query attention), sequence lengths,
// head dim, causal, scale, the mask, and Q/K/V element strides exactly as the module's views give them (read in
// place, no copy). O is FACT's: [batch, seq_q, heads, head_dim].
struct AttentionProblem {
  int64_t batch = 0, heads = 0, heads_kv = 0, seq_q = 0, seq_k = 0, head_dim = 0;
  bool causal = false;
  double scale = 0;
  HeadStrides q, k, v;
  AttentionMask mask = AttentionMask::none;
  HeadStrides mask_strides;  // the mask broadcast to [batch, heads, seq_q, seq_k] (0 broadcasts; keys contiguous)
  Element element = Element::f32;
  Numerics numerics = Numerics::tf32;  // tf32 (float32 tensors), bf16 or fp16
  Arch arch = Arch::sm90;

  // O's strides as FACT allocates it: [batch, seq_q, heads, head_dim] seen as [batch, heads, seq_q, head_dim].
  HeadStrides o() const { return {seq_q * heads * head_dim, head_dim, heads * head_dim}; }
  void validate() const;  // throws Error naming the field and the fix
  nlohmann::json to_json() const;  // mask and mask_strides only when there is a mask (records before masks match)
  static AttentionProblem from_json(const nlohmann::json& j);
};

// From an sdpa_attention / sdpa_attention_manual match: strides from the IR's q/k/v views, scale from the
// rule (1/sqrt(head_dim) when the call leaves it out), the mask's kind and broadcast strides from the bound
// $mask. Throws Error naming the match when the kernel cannot take it: a non-contiguous head dim, a causal
// mask between different sequence lengths, a V head dim unlike Q's, or a mask that does not broadcast to
// [batch, heads, seq_q, seq_k] with contiguous keys or is neither bool nor floating.
AttentionProblem attention_problem_from_match(const discover::Match& match, const ir::Graph& graph,
                                              Numerics numerics, Arch arch);

// The kernel a config renders: mma.sync on sm80+ (every numerics mode), or Hopper's warpgroup MMA (16-bit modes)
// with cp.async loads by all threads or with TMA loads by a producer warpgroup (warp specialization), or for short
// query blocks (a decode step) split-KV in fp32 FMAs (decode: block_n is the fewest keys a split takes).
enum class AttentionKernel { sm80_mma, sm90_wgmma, sm90_tma_ws, decode };
std::string to_string(AttentionKernel k);  // "sm80_mma", "sm90_wgmma", "sm90_tma_ws", "decode"
AttentionKernel attention_kernel_from_string(const std::string& s);
void to_json(nlohmann::json& j, AttentionKernel k);  // JSON holds the name
void from_json(const nlohmann::json& j, AttentionKernel& k);

// One attention kernel configuration in FlashAttention-2 terms: which kernel (its template), the CTA's query
// tile (block_m), the K/V tile it streams (block_n) and its warps, plus the traits the kernel is specialized on
// (element, numerics, head dim, arch). The kernels and their axes are data/families/attention.json's "kernels":
// sm80_mma (templates/cute/attention_fwd.cu.in), sm90_wgmma (templates/cute/attention_fwd_sm90.cu.in) and
// sm90_tma_ws (templates/cute/attention_fwd_sm90_ws.cu.in, whose `warps` counts consumer warps: its CTA adds a
// producer warpgroup of 128 threads) and decode (templates/cute/attention_decode.cu.in).
// How the consumer warpgroups of sm90_tma_ws share the tensor cores: both issue at will (cooperative), or they take
// turns so that one's softmax overlaps the other's GMMAs (pingpong, two consumer warpgroups).
enum class AttentionSchedule { cooperative, pingpong };
std::string to_string(AttentionSchedule s);  // "cooperative", "pingpong"

struct AttentionConfig {
  AttentionKernel kernel = AttentionKernel::sm80_mma;
  Arch arch = Arch::sm90;
  Element element = Element::f32;
  Numerics numerics = Numerics::tf32;
  int head_dim = 64;
  int block_m = 128, block_n = 64, warps = 4;
  AttentionSchedule schedule = AttentionSchedule::cooperative;  // in the JSON only when pingpong (ids kept)

  // q_stages Q tiles plus kv_stages K and V tiles plus padding, in bytes.
  int64_t smem_bytes(int q_stages, int kv_stages, int padding_bytes = 0) const;
  std::string id() const;       // "attn_" + 12 hex digits
  std::string summary() const;  // e.g. "sm90 attention tf32 d96 m128 n64 w4 sm80_mma"
  std::string template_name() const;  // the kernel's template under templates/
  nlohmann::json to_json() const;
  static AttentionConfig from_json(const nlohmann::json& j);
};

// Why the config cannot run the problem, or empty when it can.
std::string attention_config_rejection(const AttentionProblem& problem, const AttentionConfig& config);

// Every kernel of data/families/attention.json that takes the problem's arch and numerics, each over its own
// axes, filtered by shared memory, head dim and rows per warp, ranked by wave quantization of the (query tiles x
// batch x heads) grid and work skipped under the causal mask. Every kernel's candidates are kept (each kernel's
// best first, alternating) so that a short top_n still measures each kernel that applies.
ConfigSpace<AttentionConfig> enumerate_attention_configs(const AttentionProblem& problem, int top_n);

// The config's kernel template rendered (each template has the slots config_id, summary, element, numerics,
// head_dim, block_m, block_n, warps, config_json and exports fact_<id>_can_implement/_run/_describe taking const
// FactAttentionArgs*); throws Error naming the template when it is not in this tree.
GeneratedSource generate_attention_kernel(const AttentionConfig& config);
// The same from a template text (tests render a stand-in with the real slot set).
GeneratedSource render_attention_kernel(const AttentionConfig& config, const std::string& template_text,
                                        const std::string& what);
// "attn_<id>(Tensor q, Tensor k, Tensor v, Tensor? mask, float scale, bool causal) -> Tensor": O as the
// transpose(1, 2) view of a [batch, seq_q, heads, head_dim] tensor.
std::string attention_op_schema(const AttentionConfig& config);
GeneratedSource generate_attention_op_wrapper(const AttentionConfig& config);

}  // namespace fact::realize
