#pragma once
// One normalization kernel configuration: the thread hierarchy (threads per row: a warp or a CTA;
// rows per CTA), the vector width of each access and how many vectors each thread holds in registers,
// plus the problem traits the kernel is specialized on (kind, element, which operands exist).
#include <string>

#include <nlohmann/json.hpp>

#include "realize/families/normalization/norm_problem.h"

namespace fact::realize {

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

struct NormConfigSpace {
  int enumerated = 0;
  std::vector<NormConfig> ranked;  // best first
};

// The axes come from data/families/normalization.json. Throws Error with the commonest pruning reason
// when no config survives (e.g. cols too long to hold a row in registers).
NormConfigSpace enumerate_norm_configs(const NormProblem& problem, int top_n);

}  // namespace fact::realize
