// The conv config (id, summary, JSON) and its config space: every (tile, K tile, cluster, CTAs a SM, consumer
// warpgroups) of the family's data file whose accumulators fit the consumer warpgroups' registers, ranked by how well
// the implicit GEMM's tiles fill the output and the machine and how much of each tile's epilogue is hidden.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/arch_spec.h"
#include "core/error.h"
#include "realize/families/conv/family.h"
#include "realize/family_json.h"
#include "realize/kernel_family.h"

namespace fact::realize {
namespace {

// Higher is better: the share of computed tile elements that are output (tiles past M or N compute padding), the
// last wave's fill across the SMs, the tile's arithmetic intensity (m*n/(m+n): operand bytes per MMA), and the share
// of a tile's time spent in its K loop: with one CTA a SM its epilogue (about kEpilogueKTiles K steps of stores) is
// exposed, which a convolution's short K loop (c * taps) does not amortize; with two the other CTA's MMAs cover it.
constexpr double kEpilogueKTiles = 4.0;
double score(const ConvProblem& p, const ConvConfig& c) {
  double m = double(p.gemm_m()), n = double(p.k);
  double tiles_m = std::ceil(m / c.tile_m), tiles_n = std::ceil(n / c.tile_n);
  double utilization = (m / (tiles_m * c.tile_m)) * (n / (tiles_n * c.tile_n));
  double sms = ArchSpec::of(p.arch).sm_count;
  double tiles = tiles_m * tiles_n;
  double waves = std::ceil(tiles / sms);
  double fill = tiles / (waves * sms);
  double intensity = (double(c.tile_m) * c.tile_n / (c.tile_m + c.tile_n)) / (128.0 * 256 / 384);
  double k_tiles = double(p.gemm_k() / p.padded_c()) * std::ceil(double(p.padded_c()) / c.tile_k);
  double overlap = c.ctas_per_sm > 1 ? 1.0 : k_tiles / (k_tiles + kEpilogueKTiles);
  return utilization * (0.6 + 0.4 * fill) * std::min(1.0, 0.5 + 0.5 * intensity) * overlap;
}

// The K tile (elements) among the family's widths that loads the fewest zero channels, the widest of those: the K
// loop walks each filter tap's channels in K tiles, so a K tile wider than the channels loads zeros (a 128-byte
// tile over 8 fp32 channels: three quarters of every load and MMA).
int channel_k_tile(const ConvProblem& p) {
  int best = 0;
  int64_t best_loaded = 0;
  const nlohmann::json axes = family_data("conv").at("config_space");  // a copy: the loop below outlives no temporary
  for (int bytes : axes.at("k_tile_bytes")) {
    int tile_k = bytes / element_bytes(p.element);
    int64_t loaded = (p.padded_c() + tile_k - 1) / tile_k * tile_k;
    if (!best || loaded < best_loaded || (loaded == best_loaded && tile_k > best)) best = tile_k, best_loaded = loaded;
  }
  return best;
}

}  // namespace

nlohmann::json ConvConfig::to_json() const {
  nlohmann::json j = {{"spatial_dims", spatial_dims}, {"element", element}, {"epilogue", epilogue.to_json()},
                      {"arch", arch}, {"tile_m", tile_m}, {"tile_n", tile_n}, {"tile_k", tile_k},
                      {"cluster_m", cluster_m}, {"cluster_n", cluster_n}, {"ctas_per_sm", ctas_per_sm},
                      {"consumer_warpgroups", consumer_warpgroups}};
  j["family"] = "conv";
  return j;
}

ConvConfig ConvConfig::from_json(const nlohmann::json& j) {
  return parse_family_json("conv config", "ConvConfig::to_json", [&] {
    ConvConfig c;
    c.spatial_dims = j.at("spatial_dims");
    c.element = j.at("element");
    c.epilogue = Epilogue::from_json(j.at("epilogue"));
    c.arch = j.at("arch");
    c.tile_m = j.at("tile_m");
    c.tile_n = j.at("tile_n");
    c.tile_k = j.at("tile_k");
    c.cluster_m = j.at("cluster_m");
    c.cluster_n = j.at("cluster_n");
    c.ctas_per_sm = j.value("ctas_per_sm", 1);  // configs recorded before the knob ran one CTA a SM
    c.consumer_warpgroups = j.value("consumer_warpgroups", 1);  // and one consumer warpgroup
    return c;
  });
}

std::string ConvConfig::id() const { return config_hash_id("conv_", to_json()); }

std::string ConvConfig::summary() const {
  return fmt::format("{} conv{}d {} {}x{}x{} c{}x{}{}{} {}", to_string(arch), spatial_dims, to_string(element), tile_m,
                     tile_n, tile_k, cluster_m, cluster_n, ctas_per_sm > 1 ? fmt::format(" {}/sm", ctas_per_sm) : "",
                     consumer_warpgroups > 1 ? fmt::format(" {}wg", consumer_warpgroups) : "", epilogue.key());
}

int64_t conv_cta_smem_bytes(const ConvConfig& c) {
  const nlohmann::json limits = family_data("conv").at("limits");
  return limits.at("cta_smem_bytes").at(c.ctas_per_sm - 1).get<int64_t>();
}

std::string conv_config_rejection(const ConvProblem& p, const ConvConfig& c) {
  if (c.spatial_dims != p.spatial_dims || c.element != p.element || c.arch != p.arch || !(c.epilogue == p.epilogue))
    return "the config is specialized for another spatial rank, element, arch or epilogue";
  if (int best = channel_k_tile(p); c.tile_k != best)
    return fmt::format("a K tile of {} channels: the problem's {} (padded) channels load fewest zeros in K tiles of {}",
                       c.tile_k, p.padded_c(), best);
  const nlohmann::json limits = family_data("conv").at("limits");
  if (c.ctas_per_sm < 1 || c.ctas_per_sm > 2) return fmt::format("{} CTAs a SM: 1 or 2 only", c.ctas_per_sm);
  if (c.consumer_warpgroups < 1 || c.consumer_warpgroups > 2)
    return fmt::format("{} consumer warpgroups: 1 or 2 only", c.consumer_warpgroups);
  // Two consumer warpgroups split the tile's rows in wgmma's 64-row steps.
  if (c.consumer_warpgroups == 2 && c.tile_m % 128)
    return fmt::format("two consumer warpgroups need a tile of a multiple of 128 rows (not {})", c.tile_m);
  // The consumer warpgroups hold the whole tile's fp32 accumulators in registers.
  int per_thread = c.tile_m * c.tile_n / (limits.at("warpgroup_threads").get<int>() * c.consumer_warpgroups);
  // Two CTAs share the SM's 64K registers, the producer handing its own to the consumers (the kernel's setmaxnreg):
  // 216 a consumer thread with one warpgroup, 96 with two, of which conv.json's limits hold accumulators.
  const char* accumulator_limit = c.ctas_per_sm == 1         ? "max_accumulators_per_thread"
                                  : c.consumer_warpgroups == 1 ? "max_accumulators_per_thread_two_ctas"
                                                               : "max_accumulators_per_thread_two_ctas_two_warpgroups";
  if (per_thread > limits.at(accumulator_limit).get<int>())
    return fmt::format("a {}x{} tile gives each of the {} consumer warpgroup(s)' threads {} accumulators (over {} with "
                       "{} CTA(s) a SM)", c.tile_m, c.tile_n, c.consumer_warpgroups, per_thread,
                       limits.at(accumulator_limit).get<int>(), c.ctas_per_sm);
  // The kernel's mainloop gets the CTA's share (conv_cta_smem_bytes) less its epilogue's: at least two stages.
  int64_t stage_bytes = int64_t{c.tile_m + c.tile_n} * c.tile_k * element_bytes(c.element);
  int64_t mainloop_bytes = conv_cta_smem_bytes(c) - limits.at("epilogue_smem_allowance_bytes").get<int64_t>();
  if (2 * stage_bytes > mainloop_bytes)
    return fmt::format("two stages of a {}x{}x{} tile need {} bytes of shared memory, over the {} a CTA's mainloop "
                       "has with {} CTA(s) a SM", c.tile_m, c.tile_n, c.tile_k, 2 * stage_bytes, mainloop_bytes,
                       c.ctas_per_sm);
  if (c.tile_n >= 2 * p.k && c.tile_n > 64)
    return fmt::format("tile N {} is over twice the {} output channels", c.tile_n, p.k);
  return "";
}

ConfigSpace<ConvConfig> enumerate_conv_configs(const ConvProblem& p, int top_n) {
  p.validate();
  const nlohmann::json axes = family_data("conv").at("config_space");
  ConfigRanking<ConvConfig> ranking;
  for (int k_bytes : axes.at("k_tile_bytes"))
    for (const auto& mn : axes.at("tiles_mn"))
      for (const auto& cl : axes.at("clusters_mn"))
        for (int ctas : axes.at("ctas_per_sm"))
          for (int warpgroups : axes.at("consumer_warpgroups")) {
            ConvConfig c;
            c.spatial_dims = p.spatial_dims;
            c.element = p.element;
            c.epilogue = p.epilogue;
            c.arch = p.arch;
            c.tile_m = mn.at(0);
            c.tile_n = mn.at(1);
            c.tile_k = k_bytes / element_bytes(p.element);
            c.cluster_m = cl.at(0);
            c.cluster_n = cl.at(1);
            c.ctas_per_sm = ctas;
            c.consumer_warpgroups = warpgroups;
            // Three groups take turns, so a short top_n measures each: single CTAs, two CTAs of two consumer
            // warpgroups (16 warps share an epilogue's math: chains of costly activations after a short K loop),
            // clusters (no gain measured so far: last).
            size_t group = c.cluster_m * c.cluster_n > 1 ? 2 : c.ctas_per_sm == 2 && c.consumer_warpgroups == 2 ? 1 : 0;
            ranking.add(c, conv_config_rejection(p, c), [&] { return score(p, c); }, group);
          }
  return ranking.ranked(top_n, fmt::format("conv{}d n={} c={} k={} ({}): no conv config can take it", p.spatial_dims,
                                           p.n, p.c, p.k, to_string(p.element)));
}

}  // namespace fact::realize
