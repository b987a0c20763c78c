// The conv config (id, summary, JSON) and its config space: every (tile, K tile, cluster, CTAs a SM, consumer
// warpgroups, ping-pong, fold, splits) of the family's data file whose accumulators fit the consumer warpgroups'
// registers, ranked by how well the implicit GEMM's tiles fill the output and the machine and how much of each tile's
// epilogue is hidden.
#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/arch_spec.h"
#include "core/error.h"
#include "realize/families/conv/family.h"
#include "realize/family_json.h"
#include "realize/kernel_family.h"

namespace fact::realize {
namespace {

// A K step's fixed cost (its barriers, TMA issue and wgmma fence) in K elements of work: a K loop of many narrow
// steps (an image's 4 channels a tap) is that overhead, not MMAs.
constexpr double kKStepOverhead = 16.0;
// A tile's epilogue in the same units: about kEpilogueKTiles K steps of 128 bytes of fp32 channels.
constexpr double kEpilogueKTiles = 4.0;
constexpr double kEpilogueCost = kEpilogueKTiles * (32 + kKStepOverhead);
// Split-K must cut the modelled time by this much to rank first (its partials' traffic is modelled only roughly).
constexpr double kSplitGain = 1.15;
// A width fold's x' gather (s times x's bytes, written and read again) against its shorter K loop: measured on the
// H200, KernelBench's 8-channel 3x3 convs (9 K steps of 8 channels -> 3 of 32, under their epilogue) ran 1.5-3.5%
// slower folded, ResNet's 3-channel 7x7 stem (49 steps -> 7) 2.8x faster; a fold ranks first where it cuts the
// tile's time by more than this.
constexpr double kFoldGain = 1.15;

// The channels a K step walks (a folded config's width taps times c) and how many K steps the loop takes.
double k_steps(const ConvProblem& p, bool fold, int tile_k) {
  double taps = double(p.gemm_k() / p.padded_c()) / (fold ? double(p.filter[2]) : 1.0);
  return taps * std::ceil(double(p.kernel_channels(fold)) / tile_k);
}

// Higher is better: the share of computed tile elements that are output (tiles past M or N compute padding), the
// last wave's fill across the SMs, the tile's arithmetic intensity (m*n/(m+n): operand bytes per MMA), and a tile's
// time: its K loop (steps times their width and overhead) and its epilogue, which with one CTA a SM follows the K
// loop (a convolution's short K loop does not amortize it) and with two overlaps the other CTA's MMAs.
double score(const ConvProblem& p, const ConvConfig& c) {
  double m = double(p.gemm_m()), n = double(p.k);
  double tiles_m = std::ceil(m / c.tile_m), tiles_n = std::ceil(n / c.tile_n);
  double utilization = (m / (tiles_m * c.tile_m)) * (n / (tiles_n * c.tile_n));
  double sms = ArchSpec::of(p.arch).sm_count;
  double tiles = tiles_m * tiles_n;
  double waves = std::ceil(tiles / sms);
  double fill = tiles / (waves * sms);
  double intensity = (double(c.tile_m) * c.tile_n / (c.tile_m + c.tile_n)) / (128.0 * 256 / 384);
  double k_loop = k_steps(p, c.fold_width, c.tile_k) * (c.tile_k + kKStepOverhead);
  // Two CTAs a SM, or ping-pong's two warpgroups, overlap one tile's epilogue with another's MMAs. (A reducing
  // epilogue, ConvProblem::reduce, stores nothing, but ranked as a cheaper one it put width folds first, which
  // measured 1.17x slower on KernelBench level2/67's 8-channel conv: the cost stays the same.)
  const bool overlapped = c.ctas_per_sm > 1 || c.pingpong;
  auto tile_time = [&](double loop) { return overlapped ? std::max(loop, kEpilogueCost) : loop + kEpilogueCost; };
  // Split-K: the units' waves over the CTAs resident at once (two a SM overlap, each mostly waiting on its loads),
  // each a split's K loop and the last's reduction (a partial's store and load each about half an epilogue).
  double split_gain = 1;
  if (c.splits > 1) {
    double slots = sms * c.ctas_per_sm, s = c.splits;
    double split_time = std::ceil(tiles * s / slots) * (tile_time(k_loop / s) + (s - 1) * kEpilogueCost / 2);
    split_gain = std::ceil(tiles / slots) * tile_time(k_loop) / split_time / kSplitGain;
  }
  return utilization * (0.6 + 0.4 * fill) * std::min(1.0, 0.5 + 0.5 * intensity) * (kEpilogueCost / tile_time(k_loop)) *
         split_gain / (c.fold_width ? kFoldGain : 1.0);
}

// The K tile (elements) among the family's widths that loads the fewest zero channels, the widest of those: the K
// loop walks each filter tap's channels in K tiles, so a K tile wider than the channels loads zeros (a 128-byte
// tile over 8 fp32 channels: three quarters of every load and MMA). A folded config's K loop is a few taps of many
// channels: there the tile of the cheapest loop (steps times their width and overhead) is taken.
int channel_k_tile(const ConvProblem& p, bool fold) {
  int best = 0;
  std::pair<double, double> best_cost;  // (the K loop's cost where folded, channels loaded)
  const nlohmann::json axes = family_data("conv").at("config_space");  // a copy: the loop below outlives no temporary
  for (int bytes : axes.at("k_tile_bytes")) {
    int tile_k = bytes / element_bytes(p.element);
    double loaded = std::ceil(double(p.kernel_channels(fold)) / tile_k) * tile_k;
    std::pair<double, double> cost{fold ? k_steps(p, true, tile_k) * (tile_k + kKStepOverhead) : 0.0, loaded};
    if (!best || cost < best_cost || (cost == best_cost && tile_k > best)) best = tile_k, best_cost = cost;
  }
  return best;
}

// A direct config's input tile in shared memory (fp32 elements): the rows and columns its outputs' windows span.
int64_t direct_tile_rows(const ConvConfig& c) {
  return (c.direct_tile_h() - 1) * c.stride[1] + (c.filter[1] - 1) * c.dilation[1] + 1;
}
int64_t direct_tile_cols(const ConvConfig& c) { return (c.tile_w - 1) * c.stride[2] + (c.filter[2] - 1) * c.dilation[2] + 1; }

// Higher is better: the share of computed outputs inside the plane, the share of the staged input tile that is not
// halo (each tile re-reads its neighbours' edges from L2), and the last wave's fill; the channel block's reuse of each
// staged plane (the configs' groups by block take turns in the ranking).
double direct_score(const ConvProblem& p, const ConvConfig& c) {
  double w = double(p.out[2]), h = double(p.out[1]), tile_h = double(c.direct_tile_h());
  double tiles_w = std::ceil(w / c.tile_w), tiles_h = std::ceil(h / tile_h);
  double utilization = (w / (tiles_w * c.tile_w)) * (h / (tiles_h * tile_h));
  double halo = std::min(1.0, double(c.tile_w) * c.stride[2] * tile_h * c.stride[1] /
                                  double(direct_tile_rows(c) * direct_tile_cols(c)));
  double ctas = tiles_w * tiles_h * double(p.n * p.k / c.channel_block * p.out[0]);
  double slots = ArchSpec::of(p.arch).sm_count * 4.0;  // about four 256-thread CTAs a SM
  double fill = ctas / (std::ceil(ctas / slots) * slots);
  return utilization * halo * (0.8 + 0.2 * fill);
}

std::string direct_config_rejection(const ConvProblem& p, const ConvConfig& c) {
  const nlohmann::json limits = family_data("conv").at("limits");
  if (!p.direct()) return "a direct kernel: the problem has groups 1, which the implicit GEMM takes";
  if (c.filter != p.filter || c.stride != p.stride || c.dilation != p.dilation)
    return "the direct config is specialized for another filter, stride or dilation";
  if (c.channels_last != p.channels_last)
    return c.channels_last ? "a direct kernel an element a thread, for a chain of convolutions (channels-last); the "
                             "problem is tuned on the module's channels-first tensors"
                           : "a direct kernel staging channel planes (channels-first); the problem is tuned channels-last, "
                             "as a chain of convolutions hands it over";
  if (c.channel_block < 1 || (p.k / p.groups) % c.channel_block)
    return fmt::format("a block of {} output channels: it must divide the {} a group has", c.channel_block,
                       p.k / p.groups);
  if (c.channel_block > 1 && c.channels_last)
    return "a block of output channels: for the kernel staging channel planes (a chain's kernel takes an element a thread)";
  if (int64_t cg = p.c / p.groups; cg > limits.at("direct_max_group_channels").get<int64_t>())
    return fmt::format("{} input channels a group: the direct kernel reads each output's group channel by channel, so "
                       "it takes at most {}", cg, limits.at("direct_max_group_channels").get<int64_t>());
  if (c.channels_last) {  // no tile: an element a thread, every tap unrolled
    if (int64_t taps = c.filter[0] * c.filter[1] * c.filter[2]; taps > limits.at("direct_max_filter_taps").get<int64_t>())
      return fmt::format("a {}x{}x{} filter: the channels-last direct kernel unrolls at most {} taps", c.filter[0],
                         c.filter[1], c.filter[2], limits.at("direct_max_filter_taps").get<int64_t>());
    return "";
  }
  if (c.tile_w % 32 || c.tile_w <= 0 || c.rows_per_warp <= 0)
    return fmt::format("a {}-column tile of {} rows a warp: whole warps of columns only", c.tile_w, c.rows_per_warp);
  const bool by_row = conv_direct_taps_by_row(c);
  if (int64_t taps = (by_row ? 1 : c.filter[1]) * c.filter[2] * c.channel_block;
      taps > limits.at("direct_max_filter_taps").get<int64_t>())
    return fmt::format("a {}x{} filter {} for {} output channels: the direct kernel keeps at most {} taps in "
                       "registers", c.filter[1], c.filter[2], by_row ? "row" : "plane", c.channel_block,
                       limits.at("direct_max_filter_taps").get<int64_t>());
  if (int64_t acc = int64_t{c.channel_block} * c.rows_per_warp * (c.tile_w / 32);
      acc > limits.at("direct_max_accumulators").get<int64_t>())
    return fmt::format("{} accumulators a thread ({} channels x {} rows x {} columns), over {}", acc, c.channel_block,
                       c.rows_per_warp, c.tile_w / 32, limits.at("direct_max_accumulators").get<int64_t>());
  const int64_t taps_bytes = p.c / p.groups * c.filter[0] * c.filter[1] * c.filter[2] * c.channel_block * 4;
  if (int64_t bytes = conv_direct_smem_bytes(c) + taps_bytes; bytes > limits.at("direct_smem_bytes").get<int64_t>())
    return fmt::format("the staged input tile and the block's taps need {} bytes of shared memory, over {}", bytes,
                       limits.at("direct_smem_bytes").get<int64_t>());
  if (c.tile_w > 32 && c.tile_w >= 2 * p.out[2])
    return fmt::format("tile width {} is over twice the output's {} columns", c.tile_w, p.out[2]);
  if (c.rows_per_warp > 1 && c.direct_tile_h() >= 2 * p.out[1])
    return fmt::format("tile height {} is over twice the output's {} rows", c.direct_tile_h(), p.out[1]);
  return "";
}

}  // namespace

int64_t conv_direct_smem_bytes(const ConvConfig& c) { return direct_tile_rows(c) * direct_tile_cols(c) * 4; }

bool conv_direct_taps_by_row(const ConvConfig& c) {
  return c.channel_block >= family_data("conv").at("limits").at("direct_row_taps_min_block").get<int>();
}

int ConvConfig::direct_tile_h() const {
  return family_data("conv").at("limits").at("direct_threads").get<int>() / 32 * rows_per_warp;
}

int64_t conv_epilogue_smem_bytes(const ConvConfig& c) {
  const int64_t epi_m = c.consumer_warpgroups == 1 || c.pingpong ? 64 : 128, epi_n = std::min(c.tile_n, 32);
  const int64_t subtile = epi_m * epi_n * element_bytes(c.element);
  const int64_t subtiles = (c.tile_m / epi_m) * (c.tile_n / epi_n);
  // CUTLASS's D stages (min(subtiles, 2), allocated though D is void: the store node stages in them) and, with a
  // residual, its C stages (min(subtiles, 4)).
  int64_t bytes = std::min<int64_t>(subtiles, 2) * subtile;
  if (c.epilogue.tree.reads_source("residual")) bytes += std::min<int64_t>(subtiles, 4) * subtile;
  return bytes + family_data("conv").at("limits").at("epilogue_smem_slack_bytes").get<int64_t>();
}

nlohmann::json ConvConfig::to_json() const {
  nlohmann::json j = {{"spatial_dims", spatial_dims}, {"element", element}, {"epilogue", epilogue.to_json()},
                      {"arch", arch}};
  if (direct && channels_last) {
    j.update({{"direct", true}, {"channels_last", true}, {"filter", filter}, {"stride", stride}, {"dilation", dilation}});
  } else if (direct) {
    j.update({{"direct", true}, {"tile_w", tile_w}, {"rows_per_warp", rows_per_warp}, {"filter", filter},
              {"stride", stride}, {"dilation", dilation}});
    if (channel_block > 1) j["channel_block"] = channel_block;  // written only when set: one-channel configs keep ids
  } else {
    j.update({{"tile_m", tile_m}, {"tile_n", tile_n}, {"tile_k", tile_k}, {"cluster_m", cluster_m},
              {"cluster_n", cluster_n}, {"ctas_per_sm", ctas_per_sm}, {"consumer_warpgroups", consumer_warpgroups}});
    if (fold_width) j["fold_width"] = true;  // written only when set: unfolded configs keep their ids
    if (x3tf32) j["numerics"] = "3xtf32";    // and TF32 ones
    if (promotion_k_blocks) j["promotion_k_blocks"] = promotion_k_blocks;  // and unpromoted 3xTF32 ones
    if (splits > 1) j["splits"] = splits;    // and unsplit ones
    if (pingpong) j["pingpong"] = true;      // and cooperative ones
    if (!reduce.empty()) j.update({{"reduce", reduce}, {"reduce_over", reduce_over}});  // and those writing their output
  }
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
    c.direct = j.value("direct", false);
    if (c.direct) {
      c.channels_last = j.value("channels_last", false);
      if (!c.channels_last) {
        c.tile_w = j.at("tile_w");
        c.rows_per_warp = j.at("rows_per_warp");
        c.channel_block = j.value("channel_block", 1);
      }
      c.filter = j.at("filter");
      c.stride = j.at("stride");
      c.dilation = j.at("dilation");
      return c;
    }
    c.tile_m = j.at("tile_m");
    c.tile_n = j.at("tile_n");
    c.tile_k = j.at("tile_k");
    c.cluster_m = j.at("cluster_m");
    c.cluster_n = j.at("cluster_n");
    c.ctas_per_sm = j.value("ctas_per_sm", 1);  // configs recorded before the knob ran one CTA a SM
    c.consumer_warpgroups = j.value("consumer_warpgroups", 1);  // and one consumer warpgroup
    c.fold_width = j.value("fold_width", false);
    c.splits = j.value("splits", 1);
    c.pingpong = j.value("pingpong", false);
    c.x3tf32 = j.value("numerics", "") == "3xtf32";
    c.promotion_k_blocks = j.value("promotion_k_blocks", 0);
    c.reduce = j.value("reduce", "");
    c.reduce_over = j.value("reduce_over", "");
    return c;
  });
}

std::string ConvConfig::id() const { return config_hash_id("conv_", to_json()); }

std::string ConvConfig::summary() const {
  if (direct)
    return fmt::format("{} conv{}d {} direct {} filter {} stride {} dilation {} {}", to_string(arch), spatial_dims,
                       to_string(element),
                       channels_last ? std::string("channels-last")
                                     : fmt::format("{}x{}{}", tile_w, direct_tile_h(),
                                                   channel_block > 1 ? fmt::format(" x{} channels", channel_block) : ""),
                       fmt::join(filter, "x"), fmt::join(stride, "x"), fmt::join(dilation, "x"), epilogue.key());
  return fmt::format("{} conv{}d {}{} {}x{}x{} c{}x{}{}{}{}{} {}{}", to_string(arch), spatial_dims, to_string(element),
                     x3tf32 ? " 3xtf32" : "",
                     tile_m, tile_n, tile_k, cluster_m, cluster_n,
                     ctas_per_sm > 1 ? fmt::format(" {}/sm", ctas_per_sm) : "",
                     consumer_warpgroups > 1 ? fmt::format(" {}wg{}", consumer_warpgroups, pingpong ? " pingpong" : "")
                                             : "",
                     fold_width ? " fold" : "",
                     splits > 1 ? fmt::format(" splitk{}", splits) : "", epilogue.key(),
                     reduce.empty() ? "" : " -> " + reduce + " over " + reduce_over);
}

int64_t conv_cta_smem_bytes(const ConvConfig& c) {
  const nlohmann::json limits = family_data("conv").at("limits");
  return limits.at("cta_smem_bytes").at(c.ctas_per_sm - 1).get<int64_t>();
}

std::string conv_config_rejection(const ConvProblem& p, const ConvConfig& c) {
  if (c.spatial_dims != p.spatial_dims || c.element != p.element || c.arch != p.arch || !(c.epilogue == p.epilogue) ||
      c.reduce != p.reduce || c.reduce_over != p.reduce_over)
    return "the config is specialized for another spatial rank, element, arch, epilogue or reduction";
  if (c.direct) return direct_config_rejection(p, c);
  if (c.x3tf32 != p.x3tf32)
    return c.x3tf32 ? "a 3xTF32 kernel; the problem multiplies in TF32" : "a TF32 kernel; the problem is 3xTF32";
  if (p.direct())
    return fmt::format("an implicit GEMM takes groups 1; {} groups run as the direct kernel", p.groups);
  if (c.fold_width && c.x3tf32) return "width taps folded into channels: not with 3xTF32's split channels";
  if (c.promotion_k_blocks < 0 || (c.promotion_k_blocks && !c.x3tf32))
    return fmt::format("promotion every {} k-blocks: for 3xTF32 kernels only, 0 or more", c.promotion_k_blocks);
  if (c.fold_width && !p.can_fold_width())
    return fmt::format("width taps folded into channels: only for a forward conv of more than one width tap whose "
                       "{} (padded) channels fill less than the widest K tile", p.padded_c());
  if (int best = channel_k_tile(p, c.fold_width); c.tile_k != best)
    return c.fold_width ? fmt::format("a K tile of {} channels: the folded {} channels take the cheapest K loop in K "
                                      "tiles of {}", c.tile_k, p.folded_c(), best)
                        : fmt::format("a K tile of {} channels: the problem's {} (padded) channels load fewest zeros "
                                      "in K tiles of {}", c.tile_k, p.kernel_channels(false), best);
  const nlohmann::json limits = family_data("conv").at("limits");
  if (c.ctas_per_sm < 1 || c.ctas_per_sm > 2) return fmt::format("{} CTAs a SM: 1 or 2 only", c.ctas_per_sm);
  if (c.splits < 1) return fmt::format("{} splits of the K loop: 1 or more", c.splits);
  // The output's tiles against the SMs: split-K and ping-pong are for few and many tiles a SM.
  const int64_t tiles = ceil_div(p.gemm_m(), c.tile_m) * ceil_div(p.k, c.tile_n);
  const int64_t sms = ArchSpec::of(p.arch).sm_count;
  if (c.splits > 1) {
    if (p.transposed)
      return "split-K for a forward convolution only: a transposed one's phases each have a K loop of their own";
    // Where the tiles alone fill the resident CTAs, splitting only adds units of work (measured on the H200, ResNet's
    // 128-channel 3x3 at 56x56: 392 tiles of 128x64, split in two, 0.061 ms; the best unsplit config 0.046).
    const int64_t resident = sms * c.ctas_per_sm;
    if (tiles >= resident)
      return fmt::format("split-K where the tiles are fewer than the CTAs resident at once: {} tiles of {}x{} fill the "
                         "{}", tiles, c.tile_m, c.tile_n, resident);
    if (double k_tiles = k_steps(p, c.fold_width, c.tile_k); k_tiles < c.splits)
      return fmt::format("{} splits of a K loop of {} K tiles: each split needs one", c.splits, k_tiles);
  }
  if (c.consumer_warpgroups < 1 || c.consumer_warpgroups > 2)
    return fmt::format("{} consumer warpgroups: 1 or 2 only", c.consumer_warpgroups);
  if (c.pingpong && (c.consumer_warpgroups != 2 || c.ctas_per_sm != 1 || c.splits != 1))
    return fmt::format("ping-pong takes two consumer warpgroups, one CTA a SM and unsplit tiles (not {}, {}, {})",
                       c.consumer_warpgroups, c.ctas_per_sm, c.splits);
  // A ping-pong CTA overlaps only where each of its warpgroups has a tile: with fewer than two tiles a SM the second
  // idles and the first's epilogue is exposed again.
  if (c.pingpong && tiles < 2 * sms)
    return fmt::format("ping-pong where each SM has two tiles at least: {} tiles of {}x{} for {} SMs", tiles, c.tile_m,
                       c.tile_n, sms);
  // Two cooperative consumer warpgroups split the tile's rows in wgmma's 64-row steps.
  if (c.consumer_warpgroups == 2 && !c.pingpong && c.tile_m % 128)
    return fmt::format("two consumer warpgroups need a tile of a multiple of 128 rows (not {})", c.tile_m);
  // The consumer warpgroups hold the whole tile's fp32 accumulators in registers (ping-pong: each its own tile's).
  const int tile_warpgroups = c.pingpong ? 1 : c.consumer_warpgroups;
  int per_thread = c.tile_m * c.tile_n / (limits.at("warpgroup_threads").get<int>() * tile_warpgroups);
  // A promoting kernel holds them twice: the tensor cores' partial sums and the fp32 total.
  if (c.promotion_k_blocks) per_thread *= 2;
  // Two CTAs share the SM's 64K registers, the producer handing its own to the consumers (the kernel's setmaxnreg):
  // 216 a consumer thread with one warpgroup, 96 with two, of which conv.json's limits hold accumulators.
  const char* accumulator_limit = c.ctas_per_sm == 1         ? "max_accumulators_per_thread"
                                  : c.consumer_warpgroups == 1 ? "max_accumulators_per_thread_two_ctas"
                                                               : "max_accumulators_per_thread_two_ctas_two_warpgroups";
  if (per_thread > limits.at(accumulator_limit).get<int>())
    return fmt::format("a {}x{} tile gives each of the {} consumer warpgroup(s)' threads {} accumulators{} (over {} "
                       "with {} CTA(s) a SM)", c.tile_m, c.tile_n, c.consumer_warpgroups, per_thread,
                       c.promotion_k_blocks ? " (twice the tile's share: 3xTF32's promoted sums)" : "",
                       limits.at(accumulator_limit).get<int>(), c.ctas_per_sm);
  // The kernel's mainloop gets the CTA's share (conv_cta_smem_bytes) less its epilogue's: at least two stages.
  int64_t stage_bytes = int64_t{c.tile_m + c.tile_n} * c.tile_k * element_bytes(c.element);
  int64_t mainloop_bytes = conv_cta_smem_bytes(c) - conv_epilogue_smem_bytes(c);
  if (2 * stage_bytes > mainloop_bytes)
    return fmt::format("two stages of a {}x{}x{} tile need {} bytes of shared memory, over the {} a CTA's mainloop "
                       "has with {} CTA(s) a SM", c.tile_m, c.tile_n, c.tile_k, 2 * stage_bytes, mainloop_bytes,
                       c.ctas_per_sm);
  // A channel reduction combines every channel of a pixel in the CTA that holds them: one N tile.
  if (p.reduce_over == "channels" && (c.tile_n < p.k || c.cluster_n > 1))
    return fmt::format("a reduction over the channels needs every one of the {} in one tile (not {} wide, cluster {} "
                       "along N)", p.k, c.tile_n, c.cluster_n);
  if (c.tile_n >= 2 * p.k && c.tile_n > 64)
    return fmt::format("tile N {} is over twice the {} output channels", c.tile_n, p.k);
  return "";
}

ConfigSpace<ConvConfig> enumerate_conv_configs(const ConvProblem& p, int top_n) {
  p.validate();
  const nlohmann::json axes = family_data("conv").at("config_space");
  ConfigRanking<ConvConfig> ranking;
  ConvConfig base;  // the problem traits every kernel is specialized on
  base.spatial_dims = p.spatial_dims;
  base.element = p.element;
  base.epilogue = p.epilogue;
  base.arch = p.arch;
  base.x3tf32 = p.x3tf32;
  base.reduce = p.reduce;
  base.reduce_over = p.reduce_over;
  if (p.x3tf32) base.promotion_k_blocks = family_data("conv").at("limits").at("x3tf32_promotion_k_blocks").get<int>();
  if (p.direct() && p.channels_last) {  // a chain's: one kernel, an element a thread
    ConvConfig c = base;
    c.direct = c.channels_last = true;
    c.filter = p.filter;
    c.stride = p.stride;
    c.dilation = p.dilation;
    ranking.add(c, conv_config_rejection(p, c), [] { return 1.0; });
  } else if (p.direct()) {
    const std::vector<int> blocks = axes.at("direct").at("channel_block");
    for (size_t b = 0; b < blocks.size(); ++b)
    for (int tile_w : axes.at("direct").at("tile_w"))
      for (int rows : axes.at("direct").at("rows_per_warp")) {
        ConvConfig c = base;
        c.direct = true;
        c.tile_w = tile_w;
        c.rows_per_warp = rows;
        c.channel_block = blocks[b];
        c.filter = p.filter;
        c.stride = p.stride;
        c.dilation = p.dilation;
        // The widest block first: it stages each plane fewest times.
        ranking.add(c, conv_config_rejection(p, c), [&] { return direct_score(p, c); }, blocks.size() - 1 - b);
      }
  } else {
    for (bool fold : axes.at("fold_width"))
    for (int splits : axes.at("splits"))
    for (int k_bytes : axes.at("k_tile_bytes"))
      for (const auto& mn : axes.at("tiles_mn"))
        for (const auto& cl : axes.at("clusters_mn"))
          for (int ctas : axes.at("ctas_per_sm"))
            for (int warpgroups : axes.at("consumer_warpgroups"))
            for (bool pingpong : axes.at("pingpong")) {
              ConvConfig c = base;
              c.tile_m = mn.at(0);
              c.tile_n = mn.at(1);
              c.tile_k = k_bytes / element_bytes(p.element);
              c.cluster_m = cl.at(0);
              c.cluster_n = cl.at(1);
              c.ctas_per_sm = ctas;
              c.consumer_warpgroups = warpgroups;
              c.fold_width = fold;
              c.splits = splits;
              c.pingpong = pingpong;
              // Four groups take turns, so a short top_n measures each: single CTAs, two CTAs of two consumer
              // warpgroups (16 warps share an epilogue's math: chains of costly activations after a short K loop),
              // ping-pong warpgroups (an epilogue under the other warpgroup's MMAs, on the full tile), clusters (no
              // gain measured so far: last).
              size_t group = c.cluster_m * c.cluster_n > 1                         ? 3
                             : c.pingpong                                          ? 2
                             : c.ctas_per_sm == 2 && c.consumer_warpgroups == 2 ? 1
                                                                                : 0;
              ranking.add(c, conv_config_rejection(p, c), [&] { return score(p, c); }, group);
            }
  }
  return ranking.ranked(top_n, fmt::format("conv{}d n={} c={} k={} ({}): no conv config can take it", p.spatial_dims,
                                           p.n, p.c, p.k, to_string(p.element)));
}

}  // namespace fact::realize
