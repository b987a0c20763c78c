#pragma once
// The rope family: rotary embedding (the rope rule: x * cos + rotate_half(x) * sin, half-split form) as one
// kernel per config. problem.cpp reads a match into a RopeProblem; space.cpp has the RopeConfig and its config
// space; family.cpp renders templates/cute/rope_fwd.cu.in and rope_op.cpp.in and registers the family.
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

// One rotary-embedding workload: x [batch, heads, seq, head_dim] read through its view strides, cos/sin tables
// broadcast over batch and heads (stride 0), and the output layout the op allocates (x's dim order, dense).
struct RopeProblem {
  int64_t batch = 0, heads = 0, seq = 0, head_dim = 0;
  HeadStrides x, cos, sin, out;
  Element element = Element::f32;  // x, cos, sin and out all hold this type
  Arch arch = Arch::sm90;

  // Elementwise with fp32 math whatever the mode: float32 tensors give fp32, bf16/fp16 their own.
  Numerics numerics() const;
  int64_t rows() const { return batch * heads * seq; }
  // Widest vector (elements, power of two, <= 16 bytes) dividing head_dim / 2 and every nonzero stride.
  int max_vector_elems() const;
  // Throws Error naming the field and the fix.
  void validate() const;
  nlohmann::json to_json() const;
  static RopeProblem from_json(const nlohmann::json& j);
};

// The strides PyTorch gives an elementwise result of x (at::empty_like): dense, in x's dim order (outermost
// = largest stride), so a transposed view of a [B, T, H, D] projection yields a [B, T, H, D] tensor again.
HeadStrides dense_strides_like(const HeadStrides& x, int64_t batch, int64_t heads, int64_t seq, int64_t head_dim);

// The problem of a rope match: x must be 3-D [batch, seq, D] (one head) or 4-D [batch, heads, seq, D] with a
// contiguous last dim, cos/sin [seq, D] or [1, 1, seq, D] with a contiguous last dim, all of the anchor's dtype
// (the element type follows the numerics mode: float32 for fp32/tf32/3xtf32). Throws Error naming the match
// when the kernel cannot take it.
RopeProblem rope_problem_from_match(const discover::Match& match, const ir::Graph& graph, Numerics numerics, Arch arch);

// One rotary-embedding kernel configuration: the CTA size, the vector width of each access (each thread
// rotates a vector from the first half of a row with the matching vector of the second half) and how many
// such pairs a thread keeps in flight, plus the traits the kernel is specialized on (element, head dim, arch).
struct RopeConfig {
  Element element = Element::f32;
  Arch arch = Arch::sm90;
  int head_dim = 128;
  int threads_per_cta = 256;
  int vector_elems = 4;       // elements per load/store (16 bytes at most)
  int items_per_thread = 2;   // (first half, second half) vector pairs per thread, loaded before any is stored

  int pairs_per_row() const { return head_dim / 2 / vector_elems; }
  std::string id() const;       // "rope_" + 12 hex digits of the canonical JSON's hash
  std::string summary() const;  // e.g. "sm90 rope float32 d128 t256 v4x2"
  nlohmann::json to_json() const;
  static RopeConfig from_json(const nlohmann::json& j);
};

// Why the config cannot run the problem (a sentence), or empty when it can.
std::string rope_config_rejection(const RopeProblem& problem, const RopeConfig& config);

// The axes come from data/families/rope.json. Throws Error with the commonest pruning reason when no config
// survives.
ConfigSpace<RopeConfig> enumerate_rope_configs(const RopeProblem& problem, int top_n);

// The kernel (.cu exporting the FactRopeArgs C ABI); throws Error when the config cannot be generated.
GeneratedSource generate_rope_kernel(const RopeConfig& config);
// "rope_<id>(Tensor x, Tensor cos, Tensor sin) -> Tensor"
std::string rope_op_schema(const RopeConfig& config);
GeneratedSource generate_rope_op_wrapper(const RopeConfig& config);

}  // namespace fact::realize
