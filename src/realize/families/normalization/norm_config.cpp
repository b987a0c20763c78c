#include "realize/families/normalization/norm_config.h"

#include <fmt/format.h>

#include "core/error.h"
#include "realize/kernel_family.h"

namespace fact::realize {

std::string NormConfig::id() const { return config_hash_id("norm_", to_json()); }

std::string NormConfig::summary() const {
  return fmt::format("{} {} {} tpr{} rpc{} v{}x{}{}{}{}{}", to_string(arch), to_string(kind), to_string(element),
                     threads_per_row, rows_per_cta, vector_elems, vectors_per_thread, has_weight ? " +w" : "",
                     has_bias ? " +b" : "", has_residual ? " +res" : "", store_sum ? " +sum" : "");
}

nlohmann::json NormConfig::to_json() const {
  return {{"family", "normalization"}, {"kind", to_string(kind)}, {"element", to_string(element)},
          {"arch", to_string(arch)}, {"has_weight", has_weight}, {"has_bias", has_bias},
          {"has_residual", has_residual}, {"store_sum", store_sum}, {"threads_per_row", threads_per_row},
          {"rows_per_cta", rows_per_cta}, {"vector_elems", vector_elems}, {"vectors_per_thread", vectors_per_thread}};
}

NormConfig NormConfig::from_json(const nlohmann::json& j) {
  try {
    NormConfig c;
    c.kind = norm_kind_from_string(j.at("kind"));
    c.element = element_from_string(j.at("element"));
    c.arch = arch_from_string(j.at("arch"));
    c.has_weight = j.at("has_weight");
    c.has_bias = j.at("has_bias");
    c.has_residual = j.at("has_residual");
    c.store_sum = j.at("store_sum");
    c.threads_per_row = j.at("threads_per_row");
    c.rows_per_cta = j.at("rows_per_cta");
    c.vector_elems = j.at("vector_elems");
    c.vectors_per_thread = j.at("vectors_per_thread");
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("normalization config JSON: ") + e.what() +
                "; expected the fields written by NormConfig::to_json");
  }
}

}  // namespace fact::realize
