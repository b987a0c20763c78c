#pragma once
// One rotary-embedding workload (the rope rule: x * cos + rotate_half(x) * sin, half-split form) as the
// realize stage sees it: x [batch, heads, seq, head_dim] read through its view strides, cos/sin tables
// broadcast over batch and heads (stride 0), and the output layout the op allocates (x's dim order, dense).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "discover/match.h"
#include "ir/graph.h"
#include "realize/families/gemm/gemm_problem.h"

namespace fact::realize {

// Element strides of the batch, head and row (seq) dims; the last dim is contiguous.
struct RopeStrides {
  int64_t batch = 0, head = 0, row = 0;
  bool operator==(const RopeStrides& o) const { return batch == o.batch && head == o.head && row == o.row; }
};

struct RopeProblem {
  int64_t batch = 0, heads = 0, seq = 0, head_dim = 0;
  RopeStrides x, cos, sin, out;
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
RopeStrides dense_strides_like(const RopeStrides& x, int64_t batch, int64_t heads, int64_t seq, int64_t head_dim);

// True for matches of the rope family.
bool is_rope_family(const discover::Match& match);

// The problem of a rope match: x must be 3-D [batch, seq, D] (one head) or 4-D [batch, heads, seq, D] with a
// contiguous last dim, cos/sin [seq, D] or [1, 1, seq, D] with a contiguous last dim, all of the anchor's dtype
// (the element type follows the numerics mode: float32 for fp32/tf32/3xtf32). Throws Error naming the match
// when the kernel cannot take it.
RopeProblem rope_problem_from_match(const discover::Match& match, const ir::Graph& graph, Numerics numerics, Arch arch);

}  // namespace fact::realize
