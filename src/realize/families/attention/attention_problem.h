#pragma once
// One forward-attention workload as the realize stage sees it: batch, heads (and K/V heads for
// grouped-query attention), sequence lengths, head dim, causal, scale, and Q/K/V element strides exactly
// as the module's views give them (read in place, no copy). O is FACT's: [batch, seq_q, heads, head_dim].
#include <cstdint>

#include <nlohmann/json.hpp>

#include "discover/match.h"
#include "ir/graph.h"
#include "realize/families/gemm/gemm_problem.h"

namespace fact::realize {

struct AttentionStrides {  // element strides of a [batch, heads, seq, head_dim] view (head_dim is contiguous)
  int64_t batch = 0, head = 0, row = 0;
  bool operator==(const AttentionStrides&) const = default;
};

struct AttentionProblem {
  int64_t batch = 0, heads = 0, heads_kv = 0, seq_q = 0, seq_k = 0, head_dim = 0;
  bool causal = false;
  double scale = 0;
  AttentionStrides q, k, v;
  Element element = Element::f32;
  Numerics numerics = Numerics::tf32;  // tf32 (float32 tensors), bf16 or fp16
  Arch arch = Arch::sm90;

  // O's strides as FACT allocates it: [batch, seq_q, heads, head_dim] seen as [batch, heads, seq_q, head_dim].
  AttentionStrides o() const { return {seq_q * heads * head_dim, head_dim, heads * head_dim}; }
  void validate() const;  // throws Error naming the field and the fix
  nlohmann::json to_json() const;
  static AttentionProblem from_json(const nlohmann::json& j);
};

bool is_attention_family(const discover::Match& match);

// From an sdpa_attention / sdpa_attention_manual match: strides from the IR's q/k/v views, scale from the
// rule (1/sqrt(head_dim) when the call leaves it out). Throws Error naming the match when the kernel cannot
// take it: fp32/3xtf32 numerics (no fp32-accurate attention kernel), a non-contiguous head dim, a causal
// mask between different sequence lengths, or a V head dim unlike Q's.
AttentionProblem attention_problem_from_match(const discover::Match& match, const ir::Graph& graph,
                                              Numerics numerics, Arch arch);

}  // namespace fact::realize
