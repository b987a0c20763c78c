#pragma once
// One row-normalization workload (LayerNorm / RMSNorm over the last dim, optionally after a residual
// add) as the realize stage sees it: rows x cols, row strides, which operands exist, eps, element type.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "discover/match.h"
#include "ir/graph.h"
#include "realize/families/gemm/gemm_problem.h"

namespace fact::realize {

enum class NormKind { layer_norm, rms_norm };
std::string to_string(NormKind k);            // "layer_norm", "rms_norm"
NormKind norm_kind_from_string(const std::string& s);

struct NormProblem {
  NormKind kind = NormKind::layer_norm;
  int64_t rows = 0, cols = 0;
  int64_t x_row_stride = 0;         // elements between rows of x (>= cols; the last dim is contiguous)
  int64_t residual_row_stride = 0;  // of the residual, when present
  bool has_weight = false, has_bias = false;
  bool has_residual = false;        // y = norm(x + residual)
  bool store_sum = false;           // also write x + residual (the graph reads it)
  double eps = 1e-5;
  Element element = Element::f32;   // x, residual, weight, bias, y and sum all hold this type
  Arch arch = Arch::sm90;

  // Norms accumulate in fp32 whatever the mode: float32 tensors give fp32, bf16/fp16 their own.
  Numerics numerics() const;
  // Widest vector (elements, power of two, <= 16 bytes) dividing cols and every row stride.
  int max_vector_elems() const;
  // Throws Error naming the field and the fix.
  void validate() const;
  nlohmann::json to_json() const;
  static NormProblem from_json(const nlohmann::json& j);
};

// True for matches of the normalization family.
bool is_norm_family(const discover::Match& match);

// The problem of a layer_norm / rms_norm / add_layer_norm / add_rms_norm match: x's (and the residual's)
// leading dims must fold into rows with a contiguous last dim; the residual is shaped and typed like x; the
// sum is stored when the match exports it (Match::extra_outputs, the rule's kernel.outputs "sum"); the element
// type follows the numerics mode (float32 for fp32/tf32/3xtf32). Throws Error naming the match when the
// kernel cannot take it.
NormProblem norm_problem_from_match(const discover::Match& match, const ir::Graph& graph, Numerics numerics,
                                    Arch arch);

}  // namespace fact::realize
