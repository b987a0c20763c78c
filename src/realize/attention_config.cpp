#include "realize/attention_config.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "realize/kernel_family.h"

namespace fact::realize {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Higher is better: full waves over 132 SMs, larger tiles (less K/V re-reading per query row) and, under
// a causal mask, a block_n that wastes little of the diagonal tiles.
double score(const AttentionProblem& p, const AttentionConfig& c) {
  double ctas = double(ceil_div(p.seq_q, c.block_m) * p.batch * p.heads);
  double waves = ctas / 132.0;
  double quantization = waves / std::ceil(waves);
  double reuse = std::sqrt(double(c.block_m) / 128.0);
  double diagonal = p.causal ? 1.0 - 0.5 * double(c.block_n) / double(std::max<int64_t>(p.seq_k, c.block_n)) : 1.0;
  double warp_rows = double(c.block_m) / c.warps;
  double occupancy = warp_rows == 16 ? 1.0 : 0.95;
  return quantization * reuse * diagonal * occupancy;
}

}  // namespace

int64_t AttentionConfig::smem_bytes(int kv_stages) const {
  return int64_t{element_bytes(element)} * head_dim * (block_m + 2LL * kv_stages * block_n);
}

std::string AttentionConfig::id() const { return config_hash_id("attn_", to_json()); }

std::string AttentionConfig::summary() const {
  return fmt::format("{} attention {} d{} m{} n{} w{}", to_string(arch), to_string(numerics), head_dim, block_m,
                     block_n, warps);
}

nlohmann::json AttentionConfig::to_json() const {
  return {{"family", "attention"}, {"arch", to_string(arch)}, {"element", to_string(element)},
          {"numerics", to_string(numerics)}, {"head_dim", head_dim}, {"block_m", block_m}, {"block_n", block_n},
          {"warps", warps}};
}

AttentionConfig AttentionConfig::from_json(const nlohmann::json& j) {
  try {
    AttentionConfig c;
    c.arch = arch_from_string(j.at("arch"));
    c.element = element_from_string(j.at("element"));
    c.numerics = numerics_from_string(j.at("numerics"));
    c.head_dim = j.at("head_dim");
    c.block_m = j.at("block_m");
    c.block_n = j.at("block_n");
    c.warps = j.at("warps");
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("attention config JSON: ") + e.what() +
                "; expected the fields written by AttentionConfig::to_json");
  }
}

std::string attention_config_rejection(const AttentionProblem& p, const AttentionConfig& c) {
  const nlohmann::json limits = family_data("attention").at("limits");
  if (c.arch != p.arch || c.element != p.element || c.numerics != p.numerics || c.head_dim != p.head_dim)
    return "the config is specialized for another arch, element, numerics or head dim";
  auto dims = limits.at("head_dims").get<std::vector<int>>();
  if (std::find(dims.begin(), dims.end(), c.head_dim) == dims.end())
    return fmt::format("head dim {} is not one the kernel is generated for ({})", c.head_dim,
                       nlohmann::json(dims).dump());
  if (c.block_m / c.warps < limits.at("min_rows_per_warp").get<int>())
    return fmt::format("{} query rows over {} warps leaves a warp fewer than {} rows (one MMA)", c.block_m, c.warps,
                       limits.at("min_rows_per_warp").get<int>());
  int64_t smem = c.smem_bytes(limits.at("kv_stages"));
  int64_t cap = limits.at("smem_bytes").at(to_string(c.arch));
  if (smem > cap) return fmt::format("needs {} bytes of shared memory, {} has {}", smem, to_string(c.arch), cap);
  return "";
}

AttentionConfigSpace enumerate_attention_configs(const AttentionProblem& p, int top_n) {
  p.validate();
  const auto axes = family_data("attention").at("config_space");
  AttentionConfigSpace space;
  std::map<std::string, int> reasons;
  std::vector<std::pair<double, AttentionConfig>> kept;
  for (int m : axes.at("block_m").get<std::vector<int>>())
    for (int n : axes.at("block_n").get<std::vector<int>>())
      for (int w : axes.at("warps").get<std::vector<int>>()) {
        ++space.enumerated;
        AttentionConfig c;
        c.arch = p.arch; c.element = p.element; c.numerics = p.numerics; c.head_dim = static_cast<int>(p.head_dim);
        c.block_m = m; c.block_n = n; c.warps = w;
        if (auto why = attention_config_rejection(p, c); !why.empty()) {
          ++reasons[why];
          continue;
        }
        kept.emplace_back(score(p, c), c);
      }
  std::stable_sort(kept.begin(), kept.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (auto& [s, c] : kept)
    if (static_cast<int>(space.ranked.size()) < top_n) space.ranked.push_back(c);
  if (space.ranked.empty()) {
    auto common = std::max_element(reasons.begin(), reasons.end(), [](auto& a, auto& b) { return a.second < b.second; });
    throw Error(fmt::format("attention d{} {}: no config can take it; commonest reason: {}", p.head_dim,
                            to_string(p.numerics), common == reasons.end() ? "none enumerated" : common->first));
  }
  return space;
}

}  // namespace fact::realize
