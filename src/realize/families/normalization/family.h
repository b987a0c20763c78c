#pragma once
// The normalization family: LayerNorm and RMSNorm over the last dim, optionally after a residual add (the
// rules layer_norm / rms_norm / add_layer_norm / add_rms_norm), as one kernel per config. problem.cpp reads a
// match into a NormProblem; space.cpp has the NormConfig and its config space; family.cpp renders
// templates/cute/norm_fwd.cu.in and norm_op.cpp.in and registers the family.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/vocabulary.h"
#include "discover/match.h"
#include "ir/graph.h"
#include "realize/config_ranking.h"
#include "realize/template_renderer.h"

namespace fact::realize {

enum class NormKind { layer_norm, rms_norm };
std::string to_string(NormKind k);            // "layer_norm", "rms_norm"
NormKind norm_kind_from_string(const std::string& s);
void to_json(nlohmann::json& j, NormKind k);  // JSON holds the name
void from_json(const nlohmann::json& j, NormKind& k);

// One row-normalization workload: rows x cols, row strides, which operands exist, eps, element type.
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

// The problem of a layer_norm / rms_norm / add_layer_norm / add_rms_norm match: x's (and the residual's)
// leading dims must fold into rows with a contiguous last dim; the residual is shaped and typed like x; the
// sum is stored when the match exports it (Match::extra_outputs, the rule's kernel.outputs "sum"); the element
// type follows the numerics mode (float32 for fp32/tf32/3xtf32). Throws Error naming the match when the
// kernel cannot take it.
NormProblem norm_problem_from_match(const discover::Match& match, const ir::Graph& graph, Numerics numerics,
                                    Arch arch);

// One normalization kernel configuration: the thread hierarchy (threads per row: a warp or a CTA;
// rows per CTA), the vector width of each access and how many vectors each thread holds in registers,
// plus the problem traits the kernel is specialized on (kind, element, which operands exist).
struct NormConfig {
  NormKind kind = NormKind::layer_norm;
  Element element = Element::f32;
  Arch arch = Arch::sm90;
  bool has_weight = false, has_bias = false, has_residual = false, store_sum = false;
  int threads_per_row = 32;     // 32: one warp per row; more: the warps of a CTA share a row
  int rows_per_cta = 4;
  int vector_elems = 4;         // elements per load/store (16 bytes at most)
  int vectors_per_thread = 1;   // the row lives in registers: cols <= vectors * threads_per_row * vector

  int threads_per_cta() const { return threads_per_row * rows_per_cta; }
  int64_t max_cols() const { return int64_t{vectors_per_thread} * threads_per_row * vector_elems; }
  std::string id() const;       // "norm_" + 12 hex digits of the canonical JSON's hash
  std::string summary() const;  // e.g. "sm90 layer_norm float32 tpr128 rpc1 v4x2 +w+b"
  nlohmann::json to_json() const;
  static NormConfig from_json(const nlohmann::json& j);
};

// Why the config cannot run the problem (a sentence), or empty when it can.
std::string norm_config_rejection(const NormProblem& problem, const NormConfig& config);

// The axes come from data/families/normalization.json. Throws Error with the commonest pruning reason
// when no config survives (e.g. cols too long to hold a row in registers).
ConfigSpace<NormConfig> enumerate_norm_configs(const NormProblem& problem, int top_n);

// The kernel (.cu exporting the FactNormArgs C ABI); throws Error when the config cannot be generated.
GeneratedSource generate_norm_kernel(const NormConfig& config);
// "norm_<id>(Tensor x, Tensor? residual, Tensor? weight, Tensor? bias, float eps) -> Tensor"
// (-> (Tensor, Tensor) when the config also writes x + residual).
std::string norm_op_schema(const NormConfig& config);
GeneratedSource generate_norm_op_wrapper(const NormConfig& config);

}  // namespace fact::realize
