#include "realize/families/attention/attention_config.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/arch_spec.h"
#include "core/error.h"
#include "realize/config_ranking.h"
#include "core/enum_names.h"
#include "realize/kernel_family.h"

namespace fact::realize {
namespace {

constexpr EnumNames<AttentionKernel, 3> kKernels{{{AttentionKernel::sm80_mma, "sm80_mma"},
                                                  {AttentionKernel::sm90_wgmma, "sm90_wgmma"},
                                                  {AttentionKernel::sm90_tma_ws, "sm90_tma_ws"}}};

// The kernel's entry in data/families/attention.json ("kernels", in order of preference).
nlohmann::json kernel_data(AttentionKernel k) {
  const nlohmann::json data = family_data("attention");
  for (const auto& entry : data.at("kernels"))
    if (entry.at("name") == to_string(k)) return entry;
  throw Error("data/families/attention.json has no kernel named " + to_string(k) + "; add it to \"kernels\"");
}

bool listed(const nlohmann::json& list, const std::string& name) {
  for (const auto& v : list)
    if (v == name) return true;
  return false;
}

// Higher is better: full waves over the SMs, larger tiles (less K/V re-reading per query row) and, under
// a causal mask, a block_n that wastes little of the diagonal tiles.
double score(const AttentionProblem& p, const AttentionConfig& c) {
  double ctas = double(ceil_div(p.seq_q, c.block_m) * p.batch * p.heads);
  double quantization = wave_efficiency(ctas, ArchSpec::of(p.arch).sm_count);
  double reuse = std::sqrt(double(c.block_m) / 128.0);
  double diagonal = p.causal ? 1.0 - 0.5 * double(c.block_n) / double(std::max<int64_t>(p.seq_k, c.block_n)) : 1.0;
  double warp_rows = double(c.block_m) / c.warps;
  double occupancy = warp_rows == 16 ? 1.0 : 0.95;
  return quantization * reuse * diagonal * occupancy;
}

}  // namespace

std::string to_string(AttentionKernel k) { return enum_name(kKernels, k); }
AttentionKernel attention_kernel_from_string(const std::string& s) { return parse_enum(kKernels, s, "attention kernel"); }

int64_t AttentionConfig::smem_bytes(int kv_stages, int padding_bytes) const {
  return int64_t{element_bytes(element)} * head_dim * (block_m + 2LL * kv_stages * block_n) + padding_bytes;
}

std::string AttentionConfig::id() const { return config_hash_id("attn_", to_json()); }

std::string AttentionConfig::summary() const {
  return fmt::format("{} attention {} d{} m{} n{} w{} {}", to_string(arch), to_string(numerics), head_dim, block_m,
                     block_n, warps, to_string(kernel));
}

std::string AttentionConfig::template_name() const { return kernel_data(kernel).at("template").get<std::string>(); }

nlohmann::json AttentionConfig::to_json() const {
  return {{"family", "attention"}, {"kernel", to_string(kernel)}, {"arch", to_string(arch)},
          {"element", to_string(element)}, {"numerics", to_string(numerics)}, {"head_dim", head_dim},
          {"block_m", block_m}, {"block_n", block_n}, {"warps", warps}};
}

AttentionConfig AttentionConfig::from_json(const nlohmann::json& j) {
  try {
    AttentionConfig c;
    // Records written before there were two kernels name none: they are the mma.sync kernel's.
    c.kernel = attention_kernel_from_string(j.value("kernel", to_string(AttentionKernel::sm80_mma)));
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
  const nlohmann::json kernel = kernel_data(c.kernel);
  const nlohmann::json& limits = kernel.at("limits");
  if (c.arch != p.arch || c.element != p.element || c.numerics != p.numerics || c.head_dim != p.head_dim)
    return "the config is specialized for another arch, element, numerics or head dim";
  if (!listed(kernel.at("archs"), to_string(c.arch)))
    return fmt::format("the {} kernel does not run on {} (archs {})", to_string(c.kernel), to_string(c.arch),
                       kernel.at("archs").dump());
  if (!listed(kernel.at("numerics"), to_string(c.numerics)))
    return fmt::format("the {} kernel does not compute in {} (numerics {})", to_string(c.kernel),
                       to_string(c.numerics), kernel.at("numerics").dump());
  auto dims = limits.at("head_dims").get<std::vector<int>>();
  if (std::find(dims.begin(), dims.end(), c.head_dim) == dims.end())
    return fmt::format("head dim {} is not one the {} kernel is generated for ({})", c.head_dim, to_string(c.kernel),
                       nlohmann::json(dims).dump());
  auto rows = limits.at("rows_per_warp").get<std::vector<int>>();
  if (c.block_m % c.warps != 0 || std::find(rows.begin(), rows.end(), c.block_m / c.warps) == rows.end())
    return fmt::format("{} query rows over {} warps is not a row count per warp the {} kernel takes ({})", c.block_m,
                       c.warps, to_string(c.kernel), nlohmann::json(rows).dump());
  int64_t smem = c.smem_bytes(limits.at("kv_stages"), limits.at("smem_padding_bytes"));
  int64_t cap = family_data("attention").at("limits").at("smem_bytes").at(to_string(c.arch));
  if (smem > cap) return fmt::format("needs {} bytes of shared memory, {} has {}", smem, to_string(c.arch), cap);
  return "";
}

AttentionConfigSpace enumerate_attention_configs(const AttentionProblem& p, int top_n) {
  p.validate();
  AttentionConfigSpace space;
  std::map<std::string, int> reasons;
  std::vector<std::vector<AttentionConfig>> per_kernel;  // each kernel's kept configs, best first
  const nlohmann::json data = family_data("attention");
  for (const auto& entry : data.at("kernels")) {
    AttentionKernel kernel = attention_kernel_from_string(entry.at("name"));
    if (!listed(entry.at("archs"), to_string(p.arch)) || !listed(entry.at("numerics"), to_string(p.numerics))) continue;
    const auto& axes = entry.at("config_space");
    std::vector<std::pair<double, AttentionConfig>> kept;
    for (int m : axes.at("block_m").get<std::vector<int>>())
      for (int n : axes.at("block_n").get<std::vector<int>>())
        for (int w : axes.at("warps").get<std::vector<int>>()) {
          ++space.enumerated;
          AttentionConfig c;
          c.kernel = kernel;
          c.arch = p.arch; c.element = p.element; c.numerics = p.numerics; c.head_dim = static_cast<int>(p.head_dim);
          c.block_m = m; c.block_n = n; c.warps = w;
          if (auto why = attention_config_rejection(p, c); !why.empty()) {
            ++reasons[why];
            continue;
          }
          kept.emplace_back(score(p, c), c);
        }
    const size_t all = kept.size();
    per_kernel.push_back(best_first(std::move(kept), all));
  }
  // Round-robin over the kernels: each kernel's best candidates get measured even under a short top_n.
  for (size_t rank = 0; static_cast<int>(space.ranked.size()) < top_n; ++rank) {
    bool any = false;
    for (const auto& configs : per_kernel)
      if (rank < configs.size() && static_cast<int>(space.ranked.size()) < top_n) {
        space.ranked.push_back(configs[rank]);
        any = true;
      }
    if (!any) break;
  }
  if (space.ranked.empty()) {
    throw Error(fmt::format("attention d{} {}: no config can take it; commonest reason: {}", p.head_dim,
                            to_string(p.numerics), commonest_reason(reasons)));
  }
  return space;
}

}  // namespace fact::realize
