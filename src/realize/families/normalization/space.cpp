// The normalization config (id, summary, JSON) and its config space: every (threads per row, rows per CTA,
// vector width) of the family's data file that can hold the problem's row in registers, ranked by a small
// occupancy/utilization model.
#include <algorithm>

#include <fmt/format.h>

#include "core/arch_spec.h"
#include "core/error.h"
#include "realize/config_ranking.h"
#include "realize/families/normalization/family.h"
#include "realize/family_json.h"
#include "realize/kernel_family.h"

namespace fact::realize {
namespace {

// Higher is better. A norm is bandwidth-bound: what matters is that every lane moves full vectors
// (utilization of the last vector sweep), that each thread has a few independent loads in flight
// (vectors_per_thread 2..8), and that the grid fills the machine (enough CTAs, not tiny CTAs).
double score(const NormProblem& p, const NormConfig& c) {
  double lanes = double(c.max_cols());
  double utilization = double(p.cols) / lanes;
  double ilp = c.vectors_per_thread >= 2 && c.vectors_per_thread <= 8 ? 1.0 : 0.85;
  double width = double(c.vector_elems * element_bytes(p.element)) / 16.0;
  double ctas = double(ceil_div(p.rows, c.rows_per_cta));
  double fill = std::min(1.0, ctas / (ArchSpec::of(p.arch).sm_count * 4.0));  // several CTAs per SM
  double cta_size = c.threads_per_cta() >= 128 ? 1.0 : 0.9;
  return utilization * ilp * (0.5 + 0.5 * width) * (0.5 + 0.5 * fill) * cta_size;
}

}  // namespace

// The config's fields by name: one list for both directions of its JSON.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NormConfig, kind, element, arch, has_weight, has_bias, has_residual, store_sum,
                                   threads_per_row, rows_per_cta, vector_elems, vectors_per_thread)

std::string NormConfig::id() const { return config_hash_id("norm_", to_json()); }

std::string NormConfig::summary() const {
  return fmt::format("{} {} {} tpr{} rpc{} v{}x{}{}{}{}{}", to_string(arch), to_string(kind), to_string(element),
                     threads_per_row, rows_per_cta, vector_elems, vectors_per_thread, has_weight ? " +w" : "",
                     has_bias ? " +b" : "", has_residual ? " +res" : "", store_sum ? " +sum" : "");
}

nlohmann::json NormConfig::to_json() const { return family_config_json(*this, "normalization"); }

NormConfig NormConfig::from_json(const nlohmann::json& j) {
  return parse_family_json("normalization config", "NormConfig::to_json", [&] { return j.get<NormConfig>(); });
}

std::string norm_config_rejection(const NormProblem& p, const NormConfig& c) {
  if (c.kind != p.kind || c.element != p.element || c.arch != p.arch || c.has_weight != p.has_weight ||
      c.has_bias != p.has_bias || c.has_residual != p.has_residual || c.store_sum != p.store_sum)
    return "the config is specialized for another kind, element, arch or operand set";
  if (c.vector_elems < 1 || (c.vector_elems & (c.vector_elems - 1)) || c.vector_elems * element_bytes(p.element) > 16)
    return fmt::format("vector of {} elements is not a power of two of at most 16 bytes", c.vector_elems);
  if (p.max_vector_elems() % c.vector_elems)
    return fmt::format("cols {} and the row strides allow vectors of {} elements, not {}", p.cols,
                       p.max_vector_elems(), c.vector_elems);
  if (c.threads_per_row % 32) return "threads per row must be a multiple of the warp (32)";
  if (c.max_cols() < p.cols)
    return fmt::format("a row of {} does not fit {} vectors x {} threads x {} elements", p.cols, c.vectors_per_thread,
                       c.threads_per_row, c.vector_elems);
  if (c.threads_per_row > 32 && int64_t{c.threads_per_row} * c.vector_elems > p.cols)
    return "more threads than vectors in a row: some would idle";
  return "";
}

ConfigSpace<NormConfig> enumerate_norm_configs(const NormProblem& p, int top_n) {
  p.validate();
  const nlohmann::json data = family_data("normalization");
  const auto& axes = data.at("config_space");
  const auto& limits = data.at("limits");
  const int max_elems = limits.at("max_elements_per_thread");
  const int min_threads = limits.at("min_threads_per_cta"), max_threads = limits.at("max_threads_per_cta");

  ConfigRanking<NormConfig> ranking;
  for (int tpr : axes.at("threads_per_row").get<std::vector<int>>())
    for (int rpc : axes.at("rows_per_cta").get<std::vector<int>>())
      for (int vbytes : axes.at("vector_bytes").get<std::vector<int>>()) {
        // 2-byte accesses exist for 16-bit elements only (odd widths of bf16/fp16 rows); fp32 starts at 4.
        if (vbytes % element_bytes(p.element)) continue;
        NormConfig c;
        c.kind = p.kind; c.element = p.element; c.arch = p.arch;
        c.has_weight = p.has_weight; c.has_bias = p.has_bias; c.has_residual = p.has_residual; c.store_sum = p.store_sum;
        c.threads_per_row = tpr;
        c.rows_per_cta = rpc;
        c.vector_elems = vbytes / element_bytes(p.element);
        c.vectors_per_thread = static_cast<int>(ceil_div(p.cols, int64_t{tpr} * c.vector_elems));
        std::string why;
        if (c.threads_per_cta() < min_threads || c.threads_per_cta() > max_threads)
          why = fmt::format("CTA of {} threads is outside [{}, {}]", c.threads_per_cta(), min_threads, max_threads);
        else if (c.vectors_per_thread * c.vector_elems > max_elems)
          why = fmt::format("a thread would hold more than {} elements of the row in registers", max_elems);
        else if (c.rows_per_cta > 1 && ceil_div(p.rows, c.rows_per_cta) < ArchSpec::of(p.arch).sm_count)
          why = "too few rows for several rows per CTA";
        else
          why = norm_config_rejection(p, c);
        ranking.add(c, why, [&] { return score(p, c); });
      }
  return ranking.ranked(top_n, fmt::format("{} {} x {} ({}): no normalization config can take it", to_string(p.kind),
                                           p.rows, p.cols, to_string(p.element)));
}

}  // namespace fact::realize
