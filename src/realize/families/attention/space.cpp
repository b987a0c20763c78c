// The attention config (id, summary, JSON, its kernel's entry in data/families/attention.json) and its config
// space: each kernel that takes the problem's arch and numerics, over its own axes, filtered by its limits and
// ranked by wave quantization, tile size and the causal mask's diagonal.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/arch_spec.h"
#include "core/enum_names.h"
#include "core/error.h"
#include "realize/config_ranking.h"
#include "realize/families/attention/family.h"
#include "realize/family_json.h"
#include "realize/kernel_family.h"

namespace fact::realize {
namespace {

constexpr EnumNames<AttentionKernel, 4> kKernels{{{AttentionKernel::sm80_mma, "sm80_mma"},
                                                  {AttentionKernel::sm90_wgmma, "sm90_wgmma"},
                                                  {AttentionKernel::sm90_tma_ws, "sm90_tma_ws"},
                                                  {AttentionKernel::decode, "decode"}}};
constexpr EnumNames<AttentionSchedule, 2> kSchedules{{{AttentionSchedule::cooperative, "cooperative"},
                                                      {AttentionSchedule::pingpong, "pingpong"}}};

// The kernel's entry in data/families/attention.json ("kernels", in order of preference).
nlohmann::json kernel_data(AttentionKernel k) {
  const nlohmann::json data = family_data("attention");
  for (const auto& entry : data.at("kernels"))
    if (entry.at("name") == to_string(k)) return entry;
  throw Error("data/families/attention.json has no kernel named " + to_string(k) + "; add it to \"kernels\"");
}

// The kernel's schedules (data "config_space"."schedule"; a kernel without the axis is cooperative only).
std::vector<std::string> schedules_of(const nlohmann::json& kernel_entry) {
  return kernel_entry.at("config_space").value("schedule", std::vector<std::string>{"cooperative"});
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
void to_json(nlohmann::json& j, AttentionKernel k) { j = to_string(k); }
void from_json(const nlohmann::json& j, AttentionKernel& k) { k = attention_kernel_from_string(j.get<std::string>()); }
std::string to_string(AttentionSchedule s) { return enum_name(kSchedules, s); }

int64_t AttentionConfig::smem_bytes(int q_stages, int kv_stages, int padding_bytes) const {
  return int64_t{element_bytes(element)} * head_dim * (int64_t{q_stages} * block_m + 2LL * kv_stages * block_n) +
         padding_bytes;
}

std::string AttentionConfig::id() const { return config_hash_id("attn_", to_json()); }

std::string AttentionConfig::summary() const {
  return fmt::format("{} attention {} d{} m{} n{} w{} {}{}", to_string(arch), to_string(numerics), head_dim, block_m,
                     block_n, warps, to_string(kernel), schedule == AttentionSchedule::pingpong ? " pingpong" : "");
}

std::string AttentionConfig::template_name() const { return kernel_data(kernel).at("template").get<std::string>(); }

// The config's fields by name: one list for both directions of its JSON.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(AttentionConfig, kernel, arch, element, numerics, head_dim, block_m, block_n, warps)

nlohmann::json AttentionConfig::to_json() const {
  nlohmann::json j = family_config_json(*this, "attention");
  if (schedule != AttentionSchedule::cooperative) j["schedule"] = to_string(schedule);
  return j;
}

AttentionConfig AttentionConfig::from_json(const nlohmann::json& j) {
  return parse_family_json("attention config", "AttentionConfig::to_json", [&] {
    nlohmann::json fields = j;
    // Records written before there were two kernels name none: they are the mma.sync kernel's.
    if (fields.is_object() && !fields.contains("kernel")) fields["kernel"] = to_string(AttentionKernel::sm80_mma);
    auto c = fields.get<AttentionConfig>();
    if (fields.contains("schedule")) c.schedule = parse_enum(kSchedules, fields.at("schedule").get<std::string>(), "attention schedule");
    return c;
  });
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
  // A kernel of short query blocks (decode) runs any seq_q a row at a time, but is offered only those.
  if (limits.contains("max_seq_q") && p.seq_q > limits.at("max_seq_q").get<int64_t>())
    return fmt::format("the {} kernel takes query blocks of at most {} rows (seq_q {}): a row at a time, each "
                       "reading every key", to_string(c.kernel), limits.at("max_seq_q").get<int64_t>(), p.seq_q);
  if (limits.contains("rows_per_warp")) {  // the mma kernels' query tile over their warps
    auto rows = limits.at("rows_per_warp").get<std::vector<int>>();
    if (c.block_m % c.warps != 0 || std::find(rows.begin(), rows.end(), c.block_m / c.warps) == rows.end())
      return fmt::format("{} query rows over {} warps is not a row count per warp the {} kernel takes ({})", c.block_m,
                         c.warps, to_string(c.kernel), nlohmann::json(rows).dump());
  }
  const nlohmann::json schedules = schedules_of(kernel);
  if (!listed(schedules, to_string(c.schedule)))
    return fmt::format("the {} kernel has no {} schedule ({})", to_string(c.kernel), to_string(c.schedule),
                       schedules.dump());
  if (c.schedule == AttentionSchedule::pingpong && c.warps != 8)
    return fmt::format("ping-pong alternates two consumer warpgroups (warps 8), not {} warps", c.warps);
  int64_t smem = c.smem_bytes(limits.at("q_stages"), limits.at("kv_stages"), limits.at("smem_padding_bytes"));
  int64_t cap = family_data("attention").at("limits").at("smem_bytes").at(to_string(c.arch));
  if (smem > cap) return fmt::format("needs {} bytes of shared memory, {} has {}", smem, to_string(c.arch), cap);
  return "";
}

ConfigSpace<AttentionConfig> enumerate_attention_configs(const AttentionProblem& p, int top_n) {
  p.validate();
  ConfigRanking<AttentionConfig> ranking;  // one group per kernel: each kernel's best get measured
  const nlohmann::json data = family_data("attention");
  for (size_t group = 0; group < data.at("kernels").size(); ++group) {
    const nlohmann::json& entry = data.at("kernels").at(group);
    AttentionKernel kernel = attention_kernel_from_string(entry.at("name"));
    if (!listed(entry.at("archs"), to_string(p.arch)) || !listed(entry.at("numerics"), to_string(p.numerics))) continue;
    const auto& axes = entry.at("config_space");
    const auto schedules = schedules_of(entry);
    for (int m : axes.at("block_m").get<std::vector<int>>())
      for (int n : axes.at("block_n").get<std::vector<int>>())
        for (int w : axes.at("warps").get<std::vector<int>>())
          for (const std::string& s : schedules) {
            AttentionConfig c;
            c.kernel = kernel;
            c.arch = p.arch; c.element = p.element; c.numerics = p.numerics; c.head_dim = static_cast<int>(p.head_dim);
            c.block_m = m; c.block_n = n; c.warps = w;
            c.schedule = parse_enum(kSchedules, s, "attention schedule");
            ranking.add(c, attention_config_rejection(p, c), [&] { return score(p, c); }, group);
          }
  }
  return ranking.ranked(top_n, fmt::format("attention d{} {}: no config can take it", p.head_dim, to_string(p.numerics)));
}

}  // namespace fact::realize
