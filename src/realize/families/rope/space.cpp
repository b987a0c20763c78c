// The rope config (id, summary, JSON) and its config space: every (threads per CTA, vector width, pairs per
// thread) of the family's data file that the problem's strides and head dim allow, ranked by a small bandwidth
// model.
#include <algorithm>

#include <fmt/format.h>

#include "core/arch_spec.h"
#include "core/error.h"
#include "realize/config_ranking.h"
#include "realize/families/rope/family.h"
#include "realize/family_json.h"
#include "realize/kernel_family.h"

namespace fact::realize {
namespace {

int64_t work_items(const RopeProblem& p, const RopeConfig& c) { return p.rows() * c.pairs_per_row(); }

// Higher is better. RoPE moves each element of x once in and once out (the cos/sin tables stay in L2), so
// what matters is full-width accesses, a few independent pairs in flight per thread, a grid that fills the
// machine, and few idle threads in the last CTA.
double score(const RopeProblem& p, const RopeConfig& c) {
  double width = double(c.vector_elems * element_bytes(p.element)) / 16.0;
  double ilp = c.items_per_thread >= 2 ? 1.0 : 0.9;
  int64_t per_cta = int64_t{c.threads_per_cta} * c.items_per_thread;
  int64_t ctas = ceil_div(work_items(p, c), per_cta);
  double fill = std::min(1.0, double(ctas) / (ArchSpec::of(p.arch).sm_count * 2.0));  // two CTAs per SM
  double busy = double(work_items(p, c)) / double(ctas * per_cta);
  double cta_size = c.threads_per_cta == 256 ? 1.0 : 0.97;
  return (0.5 + 0.5 * width) * ilp * (0.5 + 0.5 * fill) * (0.8 + 0.2 * busy) * cta_size;
}

}  // namespace

std::string RopeConfig::id() const { return config_hash_id("rope_", to_json()); }

std::string RopeConfig::summary() const {
  return fmt::format("{} rope {} d{} t{} v{}x{}", to_string(arch), to_string(element), head_dim, threads_per_cta,
                     vector_elems, items_per_thread);
}

// The config's fields, by name: one list for both directions of its JSON.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RopeConfig, element, arch, head_dim, threads_per_cta, vector_elems, items_per_thread)

nlohmann::json RopeConfig::to_json() const {
  nlohmann::json j = family_config_json(*this, "rope");
  j["kind"] = "half_split";  // the only rotate_half form the kernel computes
  return j;
}

RopeConfig RopeConfig::from_json(const nlohmann::json& j) {
  return parse_family_json("rope config", "RopeConfig::to_json", [&] {
    if (j.value("kind", "half_split") != "half_split")
      throw Error("rope config JSON: kind " + j.at("kind").dump() + " is not \"half_split\", the only form the kernel computes");
    return j.get<RopeConfig>();
  });
}

std::string rope_config_rejection(const RopeProblem& p, const RopeConfig& c) {
  if (c.element != p.element || c.arch != p.arch || c.head_dim != p.head_dim)
    return "the config is specialized for another element, arch or head dim";
  if (c.vector_elems < 1 || (c.vector_elems & (c.vector_elems - 1)) || c.vector_elems * element_bytes(p.element) > 16)
    return fmt::format("vector of {} elements is not a power of two of at most 16 bytes", c.vector_elems);
  if (p.max_vector_elems() % c.vector_elems)
    return fmt::format("head_dim/2 = {} and the strides allow vectors of {} elements, not {}", p.head_dim / 2,
                       p.max_vector_elems(), c.vector_elems);
  if (c.threads_per_cta % 32 || c.threads_per_cta > 1024) return "threads per CTA must be whole warps, at most 1024";
  if (c.items_per_thread < 1) return "a thread rotates at least one vector pair";
  const int64_t max_items = family_data("rope").at("limits").at("max_items");
  if (work_items(p, c) + int64_t{c.threads_per_cta} * c.items_per_thread > max_items)
    return fmt::format("{} rows x {} vector pairs exceed the kernel's 32-bit indexing", p.rows(), c.pairs_per_row());
  return "";
}

ConfigSpace<RopeConfig> enumerate_rope_configs(const RopeProblem& p, int top_n) {
  p.validate();
  const nlohmann::json axes = family_data("rope").at("config_space");
  ConfigRanking<RopeConfig> ranking;
  for (int threads : axes.at("threads_per_cta").get<std::vector<int>>())
    for (int vbytes : axes.at("vector_bytes").get<std::vector<int>>())
      for (int items : axes.at("items_per_thread").get<std::vector<int>>()) {
        RopeConfig c;
        c.element = p.element;
        c.arch = p.arch;
        c.head_dim = static_cast<int>(p.head_dim);
        c.threads_per_cta = threads;
        c.vector_elems = std::max(1, vbytes / element_bytes(p.element));
        c.items_per_thread = items;
        ranking.add(c, rope_config_rejection(p, c), [&] { return score(p, c); });
      }
  return ranking.ranked(top_n, fmt::format("rope b{} h{} s{} d{} ({}): no rope config can take it", p.batch, p.heads,
                                           p.seq, p.head_dim, to_string(p.element)));
}

}  // namespace fact::realize
