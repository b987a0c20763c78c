#include "realize/families/rope/rope_config.h"

#include <fmt/format.h>

#include "core/error.h"
#include "realize/kernel_family.h"

namespace fact::realize {

std::string RopeConfig::id() const { return config_hash_id("rope_", to_json()); }

std::string RopeConfig::summary() const {
  return fmt::format("{} rope {} d{} t{} v{}x{}", to_string(arch), to_string(element), head_dim, threads_per_cta,
                     vector_elems, items_per_thread);
}

nlohmann::json RopeConfig::to_json() const {
  return {{"family", "rope"}, {"kind", "half_split"}, {"element", to_string(element)}, {"arch", to_string(arch)},
          {"head_dim", head_dim}, {"threads_per_cta", threads_per_cta}, {"vector_elems", vector_elems},
          {"items_per_thread", items_per_thread}};
}

RopeConfig RopeConfig::from_json(const nlohmann::json& j) {
  try {
    RopeConfig c;
    if (j.value("kind", "half_split") != "half_split")
      throw Error("rope config JSON: kind " + j.at("kind").dump() + " is not \"half_split\", the only form the kernel computes");
    c.element = element_from_string(j.at("element"));
    c.arch = arch_from_string(j.at("arch"));
    c.head_dim = j.at("head_dim");
    c.threads_per_cta = j.at("threads_per_cta");
    c.vector_elems = j.at("vector_elems");
    c.items_per_thread = j.at("items_per_thread");
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("rope config JSON: ") + e.what() + "; expected the fields written by RopeConfig::to_json");
  }
}

}  // namespace fact::realize
