#include "realize/families/gemm/gemm_config_space.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/arch_spec.h"
#include "core/error.h"
#include "realize/config_ranking.h"
#include "realize/families/gemm/epilogue_sm80.h"
#include "realize/families/gemm/epilogue_sm90_evt.h"

namespace fact::realize {
namespace {

// --- The tile catalogs: CUTLASS's own generator.py tiles for sm80, and the usual sm90 wgmma tiles. ---

struct TileWarps {
  int m, n;          // threadblock tile M x N
  int warps_m, warps_n;
};
// 2.x tensor-op tiles (16-bit and tf32 alike), from cutlass_library/generator.py GenerateSM80_TensorOp_*.
constexpr TileWarps kSm80TensorOpTiles[] = {
    {256, 128, 4, 2}, {128, 256, 2, 4}, {256, 64, 4, 1}, {64, 256, 1, 4},
    {128, 128, 2, 2}, {128, 64, 2, 2},  {64, 128, 2, 2}, {64, 64, 2, 2}};
// 2.x SIMT fp32 tiles, from GenerateSM80_Simt_f32 (K = 8).
constexpr TileWarps kSm80SimtTiles[] = {
    {256, 128, 4, 2}, {128, 256, 2, 4}, {128, 128, 4, 2}, {128, 64, 2, 2},
    {64, 128, 2, 2},  {64, 64, 2, 1},   {128, 32, 2, 1},  {32, 128, 1, 2}};
constexpr int kSm80TensorOpStages[] = {3, 4, 5};
constexpr int kSm80SimtStages[] = {3, 4, 5};

struct Sm90Tile {
  int m, n;
  KernelSchedule schedule;
};
// Cooperative splits M over two consumer warpgroups (M % 128 == 0); ping-pong gives each its own tile.
constexpr Sm90Tile kSm90Tiles[] = {
    {128, 128, KernelSchedule::KernelTmaWarpSpecializedCooperative},
    {128, 256, KernelSchedule::KernelTmaWarpSpecializedCooperative},
    {256, 128, KernelSchedule::KernelTmaWarpSpecializedCooperative},
    {128, 64, KernelSchedule::KernelTmaWarpSpecializedCooperative},
    {64, 128, KernelSchedule::KernelTmaWarpSpecializedPingpong},
    {64, 256, KernelSchedule::KernelTmaWarpSpecializedPingpong},
    {128, 128, KernelSchedule::KernelTmaWarpSpecializedPingpong},
    {128, 64, KernelSchedule::KernelTmaWarpSpecializedPingpong}};
constexpr GemmShape kSm90Clusters[] = {{1, 1, 1}, {2, 1, 1}, {1, 2, 1}};

// Split-K is worth trying when the data-parallel grid fills less than this much of one wave.
constexpr double kSplitKWaveThreshold = 0.5;
// Stream-K is worth trying when the data-parallel waves are less efficient than this.
constexpr double kStreamKWaveThreshold = 0.85;
// Each split must keep at least this many K tiles, so the mainloop pipeline fills.
constexpr int kMinKTilesPerSplit = 4;
constexpr int kMaxSplitKSlices = 32;
// What stream-K is assumed to reach: balanced waves, less the partial-tile fixups.
constexpr double kStreamKWaveEfficiency = 0.92;
// H100 rates the pre-pass cost is weighed with (measured: device copy 3.0 TB/s, cuBLAS TF32 ~360 TFLOP/s).
constexpr double kHbmBytesPerSecond = 3.0e12;
constexpr double kTf32FlopsPerSecond = 3.6e14;
constexpr double kKernelLaunchSeconds = 3e-6;  // launch and ramp of one kernel: what tiny problems pay
// What the register-sourced TF32 mainloop is assumed to keep of a K-major kernel's rate (its operand goes through
// registers and is transposed there); a guess the measurements replace.
constexpr double kInKernelTransposeEfficiency = 0.9;
// What the register-split 3xTF32 mainloop keeps of the pre-pass split's GEMM rate (its operand through registers, a
// split there, one promotion a k-tile), and the rate the 3xTF32 split pre-pass moves its bytes at (read once, three
// segments written). Fitted to the H100 (default numerics, --top 3): 1024 x 8192 x 8192 with a kept weight
// split3_tf32 1.30 ms vs split3_rmem_a 1.42 ms, the two activations' 4096^3 1.46 vs 1.39 ms (2048 x 4096 x 8192 1.55 vs
// 1.45; its B^T form 1.54 vs split3_rmem 1.37): a GEMM of ~1.21 ms, the pre-pass at ~1.5 TB/s.
constexpr double kRegisterSplitEfficiency = 0.88;
constexpr double kSplitPrepassBytesPerSecond = 1.5e12;
// Score credit per doubling of a tile's reuse past a 128x128 tile's (see estimate_gemm_config).
constexpr double kLargeTileCredit = 0.05;
// Kinds of kernel scored under this share of the best one take turns only after the others ran out of kernels.
constexpr double kDiverseKindScoreFloor = 0.75;

int mma_k(Numerics n) { return n == Numerics::bf16 || n == Numerics::fp16 ? 16 : 8; }

bool is_16bit(Numerics n) { return n == Numerics::bf16 || n == Numerics::fp16; }

// Fills the problem-specific fields every config shares.
GemmConfig base_config(const GemmProblem& p, KernelApi api) {
  GemmConfig c;
  c.arch = p.arch;
  c.api = api;
  c.numerics = p.numerics;
  c.op_class = p.numerics == Numerics::fp32 ? OpClass::simt : OpClass::tensor_op;
  c.layout_a = p.a.layout;
  c.layout_b = p.b.layout;
  c.layout_d = p.d.layout;
  c.element_in = p.element_in;
  c.element_out = p.element_out;
  c.epilogue = p.epilogue;
  if (c.op_class == OpClass::simt) {
    c.alignment_a = c.alignment_b = c.alignment_d = 1;  // SIMT mainloops load one element per access
  } else {
    c.alignment_a = p.alignment_a();
    c.alignment_b = p.alignment_b();
    c.alignment_d = p.alignment_d();
  }
  return c;
}

// The kernel's grid of tiles, M x N: the transposed problem's M is the caller's N.
std::pair<int64_t, int64_t> kernel_tile_grid(const GemmProblem& p, const GemmConfig& c) {
  bool swapped = c.transposes_problem();
  return {ceil_div(swapped ? p.n : p.m, c.threadblock.m), ceil_div(swapped ? p.m : p.n, c.threadblock.n)};
}

int64_t data_parallel_tiles(const GemmProblem& p, const GemmConfig& c) {
  auto [tiles_m, tiles_n] = kernel_tile_grid(p, c);
  return tiles_m * tiles_n * p.batch;
}

// Split-K slice counts that best fill the waves, at most two, best first.
std::vector<int> split_k_candidates(const GemmProblem& p, const GemmConfig& c, int sm_count) {
  std::vector<int> out;
  int64_t tiles = data_parallel_tiles(p, c);
  if (p.batch != 1 || double(tiles) >= kSplitKWaveThreshold * sm_count) return out;
  int64_t k_tiles = ceil_div(p.k, c.threadblock.k);
  std::vector<std::pair<double, int>> scored;
  for (int s = 2; s <= kMaxSplitKSlices && k_tiles / s >= kMinKTilesPerSplit; ++s)
    if (tiles * s <= 2 * sm_count) scored.push_back({wave_efficiency(tiles * s, sm_count) * s, s});
  // More slices fill more SMs; the product favors the fullest grid, ties go to fewer slices.
  std::stable_sort(scored.begin(), scored.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < scored.size() && i < 2; ++i) out.push_back(scored[i].second);
  return out;
}

// Adds the scheduling variants (swizzle, stream-K, split-K) of one tile config.
void add_scheduling_variants(const GemmProblem& p, GemmConfig c, int sm_count, std::vector<GemmConfig>& out) {
  bool sm90 = c.api == KernelApi::cutlass3_collective;
  c.tile_scheduler = sm90 ? TileScheduler::persistent : TileScheduler::data_parallel;
  int64_t tiles = data_parallel_tiles(p, c);
  out.push_back(c);
  if (tiles > sm_count) {  // rasterizing in swizzled strips keeps A/B panels in L2 across a wave
    for (int swizzle : sm90 ? std::vector<int>{2, 4, 8} : std::vector<int>{8}) {
      GemmConfig s = c;
      s.swizzle = swizzle;
      out.push_back(s);
    }
  }
  // 3.x knobs are run-time arguments of one build: the raster order CUTLASS's heuristic does not pick (it walks
  // along M when the grid has more N tiles) is one more measurement, not one more compile.
  auto [tiles_m, tiles_n] = kernel_tile_grid(p, c);
  if (sm90 && tiles_m > 1 && tiles_n > 1) {
    GemmConfig s = c;
    s.raster_order = tiles_n > tiles_m ? RasterOrder::along_n : RasterOrder::along_m;
    out.push_back(s);
    if (tiles > sm_count) {
      s.swizzle = 4;
      out.push_back(s);
    }
  }
  int64_t k_tiles = ceil_div(p.k, c.threadblock.k);
  if (wave_efficiency(tiles, sm_count) < kStreamKWaveThreshold && k_tiles >= kMinKTilesPerSplit) {
    GemmConfig s = c;
    s.tile_scheduler = TileScheduler::stream_k;
    out.push_back(s);
    if (sm90) {
      s.nondeterministic_reduction = true;
      out.push_back(s);
    }
  }
  for (int slices : split_k_candidates(p, c, sm_count)) {
    GemmConfig s = c;
    s.split_k_slices = slices;
    if (sm90) {  // the 3.x stream-K scheduler runs plain split-K when given splits > 1
      s.tile_scheduler = TileScheduler::stream_k;
      s.split_k_mode = SplitKMode::serial;
      out.push_back(s);
      s.nondeterministic_reduction = true;
      out.push_back(s);
    } else {
      s.split_k_mode = SplitKMode::serial;
      out.push_back(s);
      s.split_k_mode = SplitKMode::parallel;
      out.push_back(s);
    }
  }
}

// Over-budget stages are kept here so pruning counts them.
void enumerate_cutlass2(const GemmProblem& p, int sm_count, std::vector<GemmConfig>& out) {
  GemmConfig c = base_config(p, KernelApi::cutlass2_universal);
  bool simt = c.op_class == OpClass::simt;
  std::vector<int> tile_ks = simt ? std::vector<int>{8} : is_16bit(p.numerics) ? std::vector<int>{32, 64}
                                                                                : std::vector<int>{16, 32};
  c.instruction = simt ? GemmShape{1, 1, 1} : GemmShape{16, 8, mma_k(p.numerics)};
  auto tiles = simt ? std::vector<TileWarps>(std::begin(kSm80SimtTiles), std::end(kSm80SimtTiles))
                    : std::vector<TileWarps>(std::begin(kSm80TensorOpTiles), std::end(kSm80TensorOpTiles));
  auto stages = simt ? std::vector<int>(std::begin(kSm80SimtStages), std::end(kSm80SimtStages))
                     : std::vector<int>(std::begin(kSm80TensorOpStages), std::end(kSm80TensorOpStages));
  for (const auto& t : tiles)
    for (int tk : tile_ks)
      for (int st : stages) {
        c.threadblock = {t.m, t.n, tk};
        c.warp = {t.m / t.warps_m, t.n / t.warps_n, tk};
        c.stages = st;
        add_scheduling_variants(p, c, sm_count, out);
      }
}

bool k_major(MatrixLayout a, MatrixLayout b) { return a == MatrixLayout::row && b == MatrixLayout::column; }

// CUTLASS's builder reads a K-major A with an MN-major B by swapping A and B (SwapAB): the kernel then computes
// D^T, and an epilogue written for D gets tiles it does not expect (measured on the H100: half to three quarters of
// D unwritten, or wrong). FACT transposes such a problem itself (MainloopTransform::transposed) or copies B.
bool builder_swaps_ab(MatrixLayout a, MatrixLayout b) { return a == MatrixLayout::row && b == MatrixLayout::row; }

// wgmma has no 3xTF32 mode and reads TF32 only K-major from shared memory. A TF32 operand that is not K-major
// either gets a FACT pre-pass (a K-major copy) or is read in place by CUTLASS's register-sourced mainloop, which
// transposes an MN-major A on its way from shared memory to the MMA (a row-major B becomes that A in the
// transposed problem). 3xTF32 can also split in registers an operand that is K-major: the caller's B (split3_rmem, the
// transposed problem: a weight read once) or the caller's A (split3_rmem_a: no copy of A).
std::vector<MainloopTransform> sm90_mainloop_transforms(const GemmProblem& p) {
  if (p.numerics == Numerics::x3tf32) {
    std::vector<MainloopTransform> out = {MainloopTransform::split3_tf32};
    if (k_major(p.a.layout, p.b.layout)) out.push_back(MainloopTransform::split3_rmem);
    if (p.a.layout == MatrixLayout::row) out.push_back(MainloopTransform::split3_rmem_a);
    return out;
  }
  if (p.numerics == Numerics::tf32 && !k_major(p.a.layout, p.b.layout)) {
    if (builder_swaps_ab(p.a.layout, p.b.layout)) return {MainloopTransform::transposed, MainloopTransform::kmajor_tf32};
    return {MainloopTransform::none, MainloopTransform::kmajor_tf32};
  }
  return {MainloopTransform::none};
}

// D's rows not 16-byte aligned (GPT-2's 50257 logits): TMA cannot store it, but the linear epilogue can store from
// registers (its operands are the pre-pass's aligned copies or aligned already).
bool needs_no_smem_epilogue(const GemmConfig& c) {
  return c.alignment_d * element_bytes(c.element_out) < 16 && c.epilogue.name == "none";
}

void enumerate_cutlass3_tiles(const GemmProblem& p, GemmConfig c, int sm_count, std::vector<GemmConfig>& out) {
  int tile_k = is_16bit(p.numerics) ? 64 : 32;  // 128 bytes of K per row: one 128B-swizzle atom
  c.stages = 0;                                 // StageCountAutoCarveout: the builder fills smem
  for (const auto& t : kSm90Tiles)
    for (const auto& cluster : kSm90Clusters) {
      bool coop = t.schedule == KernelSchedule::KernelTmaWarpSpecializedCooperative;
      c.threadblock = {t.m, t.n, tile_k};
      c.warp = {coop ? t.m / 2 : t.m, t.n, tile_k};  // one consumer warpgroup's share
      c.instruction = {64, t.n, mma_k(p.numerics)};  // wgmma 64xNxK
      c.cluster = cluster;
      c.kernel_schedule = t.schedule;
      c.epilogue_schedule = coop ? EpilogueSchedule::TmaWarpSpecializedCooperative : EpilogueSchedule::TmaWarpSpecialized;
      if (needs_no_smem_epilogue(c)) c.epilogue_schedule = EpilogueSchedule::NoSmemWarpSpecialized;
      if (!c.splits_3xtf32()) {
        add_scheduling_variants(p, c, sm_count, out);
        continue;
      }
      // Promotion every k-block (4 wgmma) measured rel err 2.4e-7 at 4096^3 for 1.77x over cuBLAS fp32;
      // every 4 k-blocks is faster, and the tuner's accuracy gate decides whether it is accurate enough.
      // The register split promotes every k-tile (its 12 wgmma): every 4 k-tiles measured rel err 8.6e-7 at
      // 128 x 32768 x 32768 (H100), where the pre-pass kernels promoting every 16 wgmma of K' = 3K had 2.9e-7.
      bool rmem = c.splits_in_registers();
      for (int interval : rmem ? std::vector<int>{4} : std::vector<int>{16, 4}) {
        c.promotion_interval = interval;
        add_scheduling_variants(p, c, sm_count, out);
      }
      c.promotion_interval = 0;
    }
}

void enumerate_cutlass3(const GemmProblem& p, int sm_count, std::vector<GemmConfig>& out) {
  for (MainloopTransform transform : sm90_mainloop_transforms(p)) {
    GemmConfig c = base_config(p, KernelApi::cutlass3_collective);
    c.mainloop_transform = transform;
    enumerate_cutlass3_tiles(p, c, sm_count, out);
  }
}

// A TF32 operand that is not K-major read through CUTLASS's register-sourced mainloop (no pre-pass).
bool in_kernel_tf32_transpose(const GemmConfig& c) {
  bool in_place = c.mainloop_transform == MainloopTransform::none || c.mainloop_transform == MainloopTransform::transposed;
  return c.api == KernelApi::cutlass3_collective && c.numerics == Numerics::tf32 && in_place &&
         !k_major(c.layout_a, c.layout_b);
}

// GEMM time / (GEMM + pre-pass time) for a mainloop transform: the pre-pass streams its operands once and writes
// their copies (B's once, for a module weight), while the GEMM runs K' = segments * K at the TF32 tensor-core rate or
// streams what it reads (split3_tf32 three copies of each operand, a register split the operand it splits once and
// two of the other), whichever takes longer: a short A against a large weight is bound by the weight's bytes.
double prepass_factor(const GemmProblem& p, const GemmConfig& c) {
  if (c.mainloop_transform == MainloopTransform::none || c.mainloop_transform == MainloopTransform::transposed) return 1.0;
  bool rmem = c.mainloop_transform == MainloopTransform::split3_rmem, rmem_a = c.mainloop_transform == MainloopTransform::split3_rmem_a;
  double segments = c.splits_3xtf32() ? 3.0 : 1.0;
  auto copied = [&](MatrixLayout layout, MatrixLayout k_major_layout, int alignment) {
    return c.splits_3xtf32() || layout != k_major_layout || alignment < 4;
  };
  double batch_a = p.a.batch_stride == 0 ? 1.0 : double(p.batch), batch_b = p.b.batch_stride == 0 ? 1.0 : double(p.batch);
  double a_bytes = 4.0 * double(p.m) * double(p.k) * batch_a, b_bytes = 4.0 * double(p.n) * double(p.k) * batch_b;
  double copy_bytes = 0, launches = 0;
  if (!rmem_a && copied(c.layout_a, MatrixLayout::row, c.alignment_a)) {
    copy_bytes += (1.0 + (rmem ? 2.0 : segments)) * a_bytes;
    launches += 1;
  }
  if (!rmem && copied(c.layout_b, MatrixLayout::column, c.alignment_b) && !p.b.constant) {  // a weight's copy is kept
    copy_bytes += (1.0 + (rmem_a ? 2.0 : segments)) * b_bytes;
    launches += 1;
  }
  double rate = c.splits_3xtf32() ? kSplitPrepassBytesPerSecond : kHbmBytesPerSecond;
  double prepass_s = copy_bytes / rate + launches * kKernelLaunchSeconds;
  double compute_s = segments * 2.0 * double(p.m) * double(p.n) * double(p.k) * double(p.batch) / kTf32FlopsPerSecond;
  double streamed_bytes = rmem ? b_bytes + 2.0 * a_bytes : rmem_a ? a_bytes + 2.0 * b_bytes : segments * (a_bytes + b_bytes);
  double gemm_s = std::max(compute_s, streamed_bytes / kHbmBytesPerSecond);
  return (compute_s + kKernelLaunchSeconds) / (gemm_s + kKernelLaunchSeconds + prepass_s);
}

}  // namespace

int smem_capacity_bytes(Arch arch) { return arch == Arch::sm80 ? 164 * 1024 : 227 * 1024; }

std::optional<std::string> gemm_config_rejection(const GemmProblem& p, const GemmConfig& c, int smem_capacity) {
  if (smem_capacity <= 0) smem_capacity = smem_capacity_bytes(c.arch);
  int in_bytes = element_bytes(c.element_in), out_bytes = element_bytes(c.element_out);
  if (c.arch != p.arch) return "config arch differs from the problem's arch: enumerate for the target arch";
  if (c.numerics != p.numerics || c.element_in != p.element_in || c.element_out != p.element_out)
    return "config numerics/elements differ from the problem's";
  if (c.layout_a != p.a.layout || c.layout_b != p.b.layout || c.layout_d != p.d.layout)
    return "config layouts differ from the problem's operand layouts";
  if (c.alignment_a > p.alignment_a() || c.alignment_b > p.alignment_b() || c.alignment_d > p.alignment_d())
    return "config alignment exceeds what the problem's shapes and leading dimensions allow";
  if (c.split_k_mode != SplitKMode::none && c.split_k_slices < 2) return "split-K needs at least 2 slices";
  if (c.promotion_interval != 0 && (!c.splits_3xtf32() || c.promotion_interval % 4 != 0))
    return "promotion_interval applies to 3xTF32 split kernels (split3_tf32, split3_rmem, split3_rmem_a) only, in "
           "multiples of 4 wgmma (one 32-wide k-block)";
  if (c.split_k_mode == SplitKMode::none && c.split_k_slices != 1) return "split_k_slices > 1 needs a split-K mode";

  if (c.mainloop_transform != MainloopTransform::none) {
    if (c.api != KernelApi::cutlass3_collective)
      return "mainloop transforms (FACT operand pre-passes) feed cutlass3 kernels only: set mainloop_transform none";
    if (c.splits_3xtf32() && p.numerics != Numerics::x3tf32)
      return "mainloop_transforms split3_tf32, split3_rmem and split3_rmem_a are the 3xtf32 numerics mode: use them "
             "for 3xtf32 problems only";
    if (c.mainloop_transform == MainloopTransform::split3_rmem && !k_major(c.layout_a, c.layout_b))
      return "split3_rmem reads B in place as its K-major operand and splits A along K: it takes row-major A and "
             "column-major B (a Linear weight) only";
    if (c.mainloop_transform == MainloopTransform::split3_rmem && c.alignment_b * in_bytes < 16)
      return "split3_rmem feeds B to TMA in place: B's rows need 16-byte alignment";
    if (c.mainloop_transform == MainloopTransform::split3_rmem_a &&
        (c.layout_a != MatrixLayout::row || c.alignment_a * in_bytes < 16))
      return "split3_rmem_a feeds A to TMA in place: row-major A with 16-byte aligned rows";
    if (c.splits_in_registers()) {
      if (c.threadblock.k != 32) return "the register split's k-tile is one 128-byte row of fp32 A: tile K 32";
      // Its stage count is what shared memory holds beside CUTLASS's TMA epilogue: EpilogueTileAuto's subtile
      // (128 x 32 cooperative, 64 x 32 ping-pong) in 4 stages that D reuses, plus its barriers (67584 bytes for a
      // 128 x 256 fp32 tile). A 128 x 256 tile got one stage and hung on the H200 (the next k-tile is split before
      // the current stage is released).
      bool coop = c.kernel_schedule == KernelSchedule::KernelTmaWarpSpecializedCooperative;
      int epilogue_smem = 4 * std::min(coop ? 128 : 64, c.threadblock.m) * 32 * out_bytes + 2048;
      if ((smem_capacity - epilogue_smem - 1024) / (c.smem_bytes_per_stage() + 32) < 2)
        return "the register split needs two mainloop stages beside the epilogue's shared memory (one would wait "
               "on itself): use a smaller tile";
      if (c.kernel_schedule == KernelSchedule::KernelTmaWarpSpecializedPingpong && c.threadblock.m > 64)
        return "the register split holds two accumulators (the tensor cores' and the promoted one): a ping-pong "
               "warpgroup takes 64-row tiles (128 rows ran 2.2x slower than cooperative on the H100: 6.0 vs 2.68 ms)";
    }
    if (c.mainloop_transform == MainloopTransform::kmajor_tf32 && p.numerics != Numerics::tf32)
      return "mainloop_transform kmajor_tf32 is for tf32 problems only";
    if (c.mainloop_transform == MainloopTransform::transposed) {
      if (p.numerics != Numerics::tf32 || !builder_swaps_ab(c.layout_a, c.layout_b))
        return "mainloop_transform transposed is for tf32 problems with row-major A and B only";
      // The kernel's M and N are the caller's N and M: a vector along one is along the other there.
      if (has_bias(c.epilogue) || !c.epilogue.tree.vector_slots().empty())
        return "the transposed problem takes epilogues without bias or row/column vectors: use kmajor_tf32";
    }
  }
  if (c.api == KernelApi::cutlass3_collective) {
    if (c.arch != Arch::sm90) return "CUTLASS 3.x collective kernels need sm90: use cutlass2_universal on sm80";
    if (auto why = sm90_evt_rejection(c.epilogue.tree)) return why;
    bool prepass = c.splits_3xtf32() || c.mainloop_transform == MainloopTransform::kmajor_tf32;
    if (p.numerics == Numerics::x3tf32 && !prepass)
      return "sm90 wgmma has no 3xtf32 mode: use mainloop_transform split3_tf32, split3_rmem or split3_rmem_a, or a "
             "cutlass2_universal kernel";
    if (!(p.numerics == Numerics::tf32 || p.numerics == Numerics::x3tf32 || is_16bit(p.numerics)))
      return fmt::format("sm90 wgmma has no {} mode: use a cutlass2_universal kernel compiled for sm_90a",
                         to_string(p.numerics));
    // The pre-pass reads A and B at any alignment and writes 16-byte aligned K-major copies for TMA.
    bool no_smem = c.epilogue_schedule == EpilogueSchedule::NoSmemWarpSpecialized;
    if (no_smem && c.epilogue.name != "none")
      return "the NoSmemWarpSpecialized epilogue computes alpha * acc + beta * C only (CUTLASS builds no other)";
    if ((!prepass && (c.alignment_a * in_bytes < 16 || c.alignment_b * in_bytes < 16)) ||
        (!no_smem && c.alignment_d * out_bytes < 16))
      return "TMA needs 16-byte aligned rows: pad the leading dimensions and contiguous extents to 16 bytes";
    if (p.numerics == Numerics::tf32 && c.mainloop_transform == MainloopTransform::none && builder_swaps_ab(c.layout_a, c.layout_b))
      return "tf32 with row-major A and B: CUTLASS's register-sourced mainloop swaps A and B and computes D^T, "
             "which FACT's epilogues do not take: use mainloop_transform kmajor_tf32 (a K-major copy of B)";
    bool coop = c.kernel_schedule == KernelSchedule::KernelTmaWarpSpecializedCooperative;
    if (c.kernel_schedule == KernelSchedule::none) return "cutlass3 configs need a kernel schedule";
    if (coop && c.threadblock.m % 128 != 0) return "the cooperative schedule splits tile M over 2 warpgroups: M % 128 == 0";
    if (!no_smem && coop != (c.epilogue_schedule == EpilogueSchedule::TmaWarpSpecializedCooperative))
      return "epilogue schedule must match the kernel schedule (cooperative with cooperative)";
    if (c.tile_scheduler == TileScheduler::stream_k && !coop)
      return "the sm90 stream-K scheduler runs only with the cooperative schedule";
    if (c.tile_scheduler == TileScheduler::data_parallel) return "cutlass3 kernels use the persistent or stream-K scheduler";
    if (c.split_k_mode == SplitKMode::parallel) return "cutlass3 split-K is serial (stream-K scheduler splits)";
    if (c.split_k_mode == SplitKMode::serial && c.tile_scheduler != TileScheduler::stream_k)
      return "cutlass3 split-K runs through the stream-K scheduler";
    if (c.cluster.m * c.cluster.n > 2 && c.cluster.m * c.cluster.n != 4) return "cluster size must be 1, 2 or 4";
    auto [tiles_m, tiles_n] = kernel_tile_grid(p, c);
    if (c.cluster.m > tiles_m || c.cluster.n > tiles_n)
      return "cluster is larger than the tile grid: its multicast would have nothing to share";
    if (2 * c.smem_bytes_per_stage() > smem_capacity) return "fewer than 2 mainloop stages fit in shared memory";
    return std::nullopt;
  }

  // CUTLASS 2.x GemmUniversal.
  if (c.kernel_schedule != KernelSchedule::none || c.cluster.m * c.cluster.n * c.cluster.k != 1)
    return "cutlass2 kernels have no kernel schedule or cluster";
  if (c.stages < 2) return "cutlass2 multistage mainloops need at least 2 stages";
  if (c.stages * c.smem_bytes_per_stage() > smem_capacity)
    return fmt::format("{} stages of {} bytes exceed {} bytes of shared memory", c.stages, c.smem_bytes_per_stage(),
                       smem_capacity);
  if (c.op_class == OpClass::simt) {
    if (p.numerics != Numerics::fp32) return "SIMT kernels are for fp32 numerics only";
    if (c.alignment_a != 1 || c.alignment_b != 1 || c.alignment_d != 1) return "SIMT kernels take alignment 1";
  } else {
    if (p.numerics == Numerics::fp32) return "fp32 numerics runs on SIMT, not tensor cores (use tf32 or 3xtf32)";
    if (c.alignment_a * in_bytes < 4 || c.alignment_b * in_bytes < 4)
      return "cp.async copies at least 4 bytes: 16-bit operands need even leading dimensions and extents";
  }
  if (auto why = sm80_epilogue_rejection(c.epilogue.tree)) return why;
  if (has_bias(c.epilogue) && c.layout_d != MatrixLayout::row)
    return "cutlass2 bias epilogues broadcast bias through C with ldc = 0, which needs row-major D";
  if (c.split_k_mode != SplitKMode::none && p.batch != 1)
    return "GemmUniversal uses batch_count for either batches or split-K slices: no split-K on batched problems";
  if (c.tile_scheduler == TileScheduler::persistent) return "cutlass2 kernels are data-parallel or stream-K";
  if (c.tile_scheduler == TileScheduler::stream_k && (p.batch != 1 || c.split_k_mode != SplitKMode::none))
    return "cutlass2 stream-K is generated for unbatched problems without split-K";
  // The broadcast epilogue (gemm_sm80_broadcast.cu.in) applies its activation to every partial sum.
  if (has_residual(c.epilogue) && (c.split_k_mode != SplitKMode::none || c.tile_scheduler != TileScheduler::data_parallel))
    return "cutlass2 epilogues with a residual-slot tensor run data-parallel only (no split-K, no stream-K)";
  if (c.split_k_mode == SplitKMode::parallel &&
      (c.layout_d != MatrixLayout::row || !(c.epilogue.name == "none" || c.epilogue.name == "bias")))
    return "parallel split-K reduces row-major D with a linear epilogue only: use serial split-K";
  return std::nullopt;
}

RankedGemmConfig estimate_gemm_config(const GemmProblem& p, const GemmConfig& c, int sm_count) {
  RankedGemmConfig r;
  r.config = c;
  int64_t tiles = data_parallel_tiles(p, c);
  int slices = c.split_k_mode == SplitKMode::none ? 1 : c.split_k_slices;
  int64_t k_per_slice = ceil_div(p.k, slices);
  // The kernel's own M and N (swapped for the transposed problem) over what its tiles cover.
  auto [tiles_m, tiles_n] = kernel_tile_grid(p, c);
  double covered_m = double(tiles_m * c.threadblock.m), covered_n = double(tiles_n * c.threadblock.n);
  double covered_k = double(ceil_div(k_per_slice, c.threadblock.k) * c.threadblock.k * slices);
  r.tile_efficiency = (double(p.m) * double(p.n) / (covered_m * covered_n)) * (p.k / covered_k);
  bool stream_k = c.tile_scheduler == TileScheduler::stream_k && c.split_k_mode == SplitKMode::none;
  // Stream-K balances the last wave at the price of partial-tile fixups.
  r.wave_efficiency = stream_k ? kStreamKWaveEfficiency : wave_efficiency(tiles * slices, sm_count);

  // Reuse per byte loaded grows with tile M*N/(M+N); 64 (a 128x128 tile) is enough to be compute bound. Past it a
  // little credit where the tiles fill a wave, so that where the waves come out alike the larger tiles are measured
  // (few tiles: the waves and stream-K decide): the H100's best bf16 square kernels were 128x256 (perf-notes, GEMM
  // item 6), while a flat score measured only 128x128 tiles on the level-2 tf32 GEMMs (1024 x 8192 x 8192 at
  // --top 2: 0.87-0.91x of cuBLAS). Not for the 3xTF32 split (fp32 tiles of K' = 3K: a 128x256 stage is 48 KB):
  // on Hugging Face BERT's 8192 x 3072 x 768 GEMM its 128x256 kernel took 0.704 ms, where the 128x128 one of the
  // equal-flop 8192 x 768 x 3072 took 0.514 ms.
  double reuse = double(c.threadblock.m) * c.threadblock.n / (c.threadblock.m + c.threadblock.n);
  double factor = std::sqrt(std::min(1.0, reuse / 64.0));
  if (tiles >= sm_count && !c.splits_3xtf32())
    factor *= 1.0 + kLargeTileCredit * std::log2(std::max(1.0, reuse / 64.0));
  // mma.sync on H100 reaches about half of what wgmma does; its 3xTF32 (three MMAs and both operands split in
  // registers) about a third of the split wgmma kernels' GEMM rate: 3.05-4.65 ms at 4096^3 against their ~1.21 ms,
  // and 0.68 ms at 256 x 256 x 131072 (H200), where this score had put it at ~0.31 ms.
  if (c.api == KernelApi::cutlass2_universal && c.arch == Arch::sm90 && c.op_class == OpClass::tensor_op)
    factor *= c.numerics == Numerics::x3tf32 ? 0.35 : 0.5;
  factor *= prepass_factor(p, c);
  if (in_kernel_tf32_transpose(c)) factor *= kInKernelTransposeEfficiency;
  if (c.splits_in_registers()) factor *= kRegisterSplitEfficiency;
  if (c.api == KernelApi::cutlass2_universal && c.stages < 4) factor *= 0.97;  // shallower latency hiding
  // Split-K pays for its reduction: 2.x serial slices take turns on D behind a semaphore, 3.x splits and
  // 2.x parallel slices write fp32 partials that are read back (the latter by a second kernel).
  if (c.split_k_mode == SplitKMode::serial) factor /= 1.0 + (c.api == KernelApi::cutlass3_collective ? 0.002 : 0.005) * slices;
  // The 3.x turnstile makes a tile's slices wait in K order: measured 2x slower than cuBLAS at 256x256x131072 bf16.
  if (c.api == KernelApi::cutlass3_collective && c.tile_scheduler == TileScheduler::stream_k && !c.nondeterministic_reduction)
    factor *= 0.8;
  if (c.split_k_mode == SplitKMode::parallel) factor *= 0.97 / (1.0 + 0.002 * slices);
  if (c.epilogue_schedule == EpilogueSchedule::NoSmemWarpSpecialized) factor *= 0.9;  // stores element by element
  if (c.swizzle > 1) factor *= 1.01;
  if (c.promotion_interval == 4 && c.mainloop_transform == MainloopTransform::split3_tf32) factor *= 0.9;  // every k-block: 1.50 ms vs 1.18 ms unpromoted at 4096^3 (H100)
  if (c.cluster.m * c.cluster.n > 1 && tiles >= sm_count) factor *= 1.02;     // TMA multicast halves one operand's loads
  r.score = r.wave_efficiency * r.tile_efficiency * factor;
  return r;
}

GemmConfigSpace enumerate_gemm_configs(const GemmProblem& p, const GemmSpaceOptions& o) {
  p.validate();
  int smem = o.smem_capacity_bytes > 0 ? o.smem_capacity_bytes : smem_capacity_bytes(p.arch);
  int sm_count = o.sm_count > 0 ? o.sm_count : ArchSpec::of(p.arch).sm_count;
  std::vector<GemmConfig> all;
  if (p.arch == Arch::sm90) enumerate_cutlass3(p, sm_count, all);
  if (p.arch == Arch::sm80 || o.cutlass2_on_sm90) enumerate_cutlass2(p, sm_count, all);

  GemmConfigSpace space;
  space.enumerated = int(all.size());
  for (const auto& c : all) {
    if (auto why = gemm_config_rejection(p, c, smem)) {
      space.pruned[*why]++;
      continue;
    }
    space.ranked.push_back(estimate_gemm_config(p, c, sm_count));
  }
  if (space.ranked.empty()) {
    throw Error(fmt::format("no GEMM kernel config fits {} ({} candidates pruned); commonest reason: {}",
                            p.workload_key(), space.enumerated, commonest_reason(space.pruned)));
  }
  std::stable_sort(space.ranked.begin(), space.ranked.end(),
                   [](const RankedGemmConfig& a, const RankedGemmConfig& b) { return a.score > b.score; });
  // top_n counts kernels (what nvcc builds). The scores are rough, so the kernels are picked diverse first: the
  // kinds of kernel (API, mainloop transform, schedule) take turns, best kind first, each giving its best kernel of
  // a tile shape it has not given yet (then its best left). Kinds scored far below the best (2.x mma.sync on sm90)
  // join only when the others run out. Each kernel keeps its best run-time variants (they share its build); the
  // result stays in score order.
  struct Kind {
    double best = 0;
    std::vector<std::pair<std::string, std::string>> kernels;  // (kernel id, tile), best first
    std::set<std::string> tiles_given;
  };
  std::vector<std::string> kind_order;
  std::map<std::string, Kind> kinds;
  for (const auto& r : space.ranked) {
    const GemmConfig& c = r.config;
    std::string k = fmt::format("{}/{}/{}", to_string(c.api), to_string(c.mainloop_transform), to_string(c.kernel_schedule));
    std::string id = c.kernel_id(), tile = fmt::format("{}x{}x{}", c.threadblock.m, c.threadblock.n, c.threadblock.k);
    if (!kinds.count(k)) {
      kind_order.push_back(k);
      kinds[k].best = r.score;
    }
    auto& list = kinds[k].kernels;
    if (std::none_of(list.begin(), list.end(), [&](auto& e) { return e.first == id; })) list.emplace_back(id, tile);
  }
  std::map<std::string, int> variants;  // chosen kernel id -> variants kept
  auto take_turns = [&](double floor) {
    for (bool any = true; any && int(variants.size()) < o.top_n;) {
      any = false;
      for (const auto& name : kind_order) {
        Kind& kind = kinds[name];
        if (kind.best < floor || int(variants.size()) == o.top_n) continue;
        auto fresh = [&](auto& e) { return !variants.count(e.first) && !kind.tiles_given.count(e.second); };
        auto unused = [&](auto& e) { return !variants.count(e.first); };
        auto it = std::find_if(kind.kernels.begin(), kind.kernels.end(), fresh);
        if (it == kind.kernels.end()) it = std::find_if(kind.kernels.begin(), kind.kernels.end(), unused);
        if (it == kind.kernels.end()) continue;
        variants.emplace(it->first, 0);
        kind.tiles_given.insert(it->second);
        any = true;
      }
    }
  };
  double best = space.ranked.front().score;
  take_turns(kDiverseKindScoreFloor * best);
  take_turns(0.0);
  std::vector<RankedGemmConfig> kept;
  for (auto& r : space.ranked) {
    auto it = variants.find(r.config.kernel_id());
    if (it == variants.end() || it->second == o.max_variants_per_kernel) continue;
    ++it->second;
    kept.push_back(std::move(r));
  }
  space.ranked = std::move(kept);
  return space;
}

}  // namespace fact::realize
