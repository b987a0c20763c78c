// GEMM problem description, config JSON/id, and the config space's enumeration, pruning and ranking.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "realize/families/gemm/gemm_config_space.h"

using namespace fact;
using namespace fact::realize;

namespace {

GemmConfigSpace all_configs(const GemmProblem& p) { return enumerate_gemm_configs(p, {.top_n = 100000}); }

bool any_pruned_for(const GemmConfigSpace& s, const std::string& words) {
  for (auto& [why, n] : s.pruned)
    if (why.find(words) != std::string::npos) return true;
  return false;
}

// A [m, k] operand stored column-major (a transposed view, A.T of a [k, m] tensor).
GemmProblem with_column_major_a(GemmProblem p) {
  p.a.layout = MatrixLayout::column;
  p.a.ld = p.m;
  return p;
}

}  // namespace

TEST(GemmProblem, NamesRoundTripAndErrorsListChoices) {
  for (auto n : {Numerics::fp32, Numerics::tf32, Numerics::x3tf32, Numerics::bf16, Numerics::fp16})
    EXPECT_EQ(numerics_from_string(to_string(n)), n);
  EXPECT_EQ(to_string(Numerics::x3tf32), "3xtf32");
  for (auto e : {Epilogue::named("none"), Epilogue::named("bias"), Epilogue::named("bias_relu"), Epilogue::named("bias_silu"), Epilogue::named("bias_gelu_erf"),
                 Epilogue::named("bias_gelu_tanh"), Epilogue::named("bias_residual")})
    EXPECT_EQ(epilogue_from_string(to_string(e)), e);
  try {
    numerics_from_string("fp64");
    FAIL();
  } catch (const fact::Error& e) {
    EXPECT_NE(std::string(e.what()).find("3xtf32"), std::string::npos) << e.what();
  }
}

TEST(GemmProblem, LayoutAndAlignmentFromStrides) {
  auto row = GemmProblem::operand_from_strides({64, 128}, {128, 1}, "A");
  EXPECT_EQ(row.layout, MatrixLayout::row);
  EXPECT_EQ(row.ld, 128);
  auto col = GemmProblem::operand_from_strides({128, 64}, {1, 128}, "B");  // W.t() of a Linear weight [64,128]
  EXPECT_EQ(col.layout, MatrixLayout::column);
  EXPECT_EQ(col.ld, 128);
  auto batched = GemmProblem::operand_from_strides({4, 64, 32}, {2048, 32, 1}, "A");
  EXPECT_EQ(batched.batch_stride, 2048);
  EXPECT_THROW(GemmProblem::operand_from_strides({8, 8}, {16, 2}, "A"), fact::Error);

  auto p = GemmProblem::packed(4096, 4096, 4096, 1, Numerics::bf16, Arch::sm90);
  EXPECT_EQ(p.alignment_a(), 8);
  auto odd = GemmProblem::packed(1000, 1000, 1001, 1, Numerics::bf16, Arch::sm90);
  EXPECT_EQ(odd.alignment_a(), 1);  // K = 1001 is odd
  EXPECT_EQ(odd.alignment_b(), 8);
  auto f = GemmProblem::packed(100, 100, 102, 1, Numerics::tf32, Arch::sm90);
  EXPECT_EQ(f.alignment_a(), 2);
  EXPECT_EQ(GemmProblem::from_json(p.to_json()).workload_key(), p.workload_key());
}

TEST(GemmConfig, JsonRoundTripAndStableId) {
  auto space = all_configs(GemmProblem::packed(2048, 2048, 2048, 1, Numerics::bf16, Arch::sm90, true));
  std::set<std::string> ids;
  for (const auto& r : space.ranked) {
    auto back = GemmConfig::from_json(r.config.to_json());
    EXPECT_EQ(back.to_json(), r.config.to_json());
    EXPECT_EQ(back.id(), r.config.id());
    EXPECT_EQ(r.config.id().size(), 12u);
    ids.insert(r.config.id());
  }
  EXPECT_EQ(ids.size(), space.ranked.size()) << "distinct configs must get distinct ids";
  GemmConfig c;  // the id of a fixed config never changes: tuning records depend on it
  EXPECT_EQ(c.id(), GemmConfig::from_json(c.to_json()).id());
  GemmConfig d = c;
  d.stages = 5;
  EXPECT_NE(c.id(), d.id());
  EXPECT_THROW(GemmConfig::from_json({{"arch", "sm90"}}), fact::Error);
}

TEST(GemmConfigSpace, SharedMemoryBoundIsRespected) {
  for (Arch arch : {Arch::sm80, Arch::sm90}) {
    auto p = GemmProblem::packed(4096, 4096, 4096, 1, Numerics::tf32, arch, true);
    auto s = all_configs(p);
    for (const auto& r : s.ranked) {
      int stages = r.config.stages == 0 ? 2 : r.config.stages;
      EXPECT_LE(stages * r.config.smem_bytes_per_stage(), smem_capacity_bytes(arch)) << r.config.summary();
    }
    if (arch == Arch::sm80) {
      EXPECT_TRUE(any_pruned_for(s, "exceed")) << "tf32 256x128x32 x5 stages must be pruned on sm80";
    }
  }
}

TEST(GemmConfigSpace, OddShapesPruneByAlignment) {
  // bf16 with odd K: no 16-byte TMA rows, and cp.async cannot copy 2 bytes: nothing fits.
  auto odd_bf16 = GemmProblem::packed(1000, 1000, 1001, 1, Numerics::bf16, Arch::sm90);
  try {
    enumerate_gemm_configs(odd_bf16);
    FAIL() << "expected an error";
  } catch (const fact::Error& e) {
    EXPECT_NE(std::string(e.what()).find(odd_bf16.workload_key()), std::string::npos) << e.what();
  }
  // fp32 with K = 102 (alignment 2): tf32 runs only on 2.x kernels with the narrower access.
  auto odd_tf32 = GemmProblem::packed(100, 100, 102, 1, Numerics::tf32, Arch::sm90, true);
  auto s = all_configs(odd_tf32);
  EXPECT_TRUE(any_pruned_for(s, "TMA needs 16-byte"));
  for (const auto& r : s.ranked) {
    EXPECT_EQ(r.config.api, KernelApi::cutlass2_universal);
    EXPECT_EQ(r.config.alignment_a, 2);
  }
}

TEST(GemmConfigSpace, SplitKOfferedForLargeKNotForSquare) {
  // 256x256 is 1-4 tiles on 132 SMs: the tuner's top 16 must hold split-K, and no data-parallel config leads.
  auto large_k = enumerate_gemm_configs(GemmProblem::packed(256, 256, 131072, 1, Numerics::bf16, Arch::sm90, true),
                                        {.top_n = 16});
  bool split = false;
  for (const auto& r : large_k.ranked) split |= r.config.split_k_mode != SplitKMode::none && r.config.split_k_slices >= 8;
  EXPECT_TRUE(split);
  EXPECT_GT(large_k.ranked.front().wave_efficiency, 0.8);

  auto fp32_large_k = all_configs(GemmProblem::packed(256, 256, 131072, 1, Numerics::fp32, Arch::sm80));
  bool parallel = false;
  for (const auto& r : fp32_large_k.ranked) parallel |= r.config.split_k_mode == SplitKMode::parallel;
  EXPECT_TRUE(parallel);

  auto square = all_configs(GemmProblem::packed(4096, 4096, 4096, 1, Numerics::bf16, Arch::sm90, true));
  for (const auto& r : square.ranked) EXPECT_EQ(r.config.split_k_mode, SplitKMode::none) << r.config.summary();
}

TEST(GemmConfigSpace, Sm90Tf32NotKMajorGetsTheRegisterSourcedMainloopAndThePrepass) {
  // Column-major A is M-major, which wgmma tf32 cannot read from shared memory: CUTLASS's register-sourced mainloop
  // (no transform: A goes through registers, transposed there) and FACT's K-major copy pre-pass both compete.
  auto p = with_column_major_a(GemmProblem::packed(2048, 2048, 2048, 1, Numerics::tf32, Arch::sm90, /*b_column=*/true));
  auto tn = all_configs(p);
  EXPECT_EQ(tn.ranked.front().config.api, KernelApi::cutlass3_collective);
  std::set<MainloopTransform> transforms;
  for (const auto& r : tn.ranked)
    if (r.config.api == KernelApi::cutlass3_collective) transforms.insert(r.config.mainloop_transform);
  EXPECT_EQ(transforms, (std::set<MainloopTransform>{MainloopTransform::none, MainloopTransform::kmajor_tf32}));
  GemmConfig in_kernel = tn.ranked.front().config;
  in_kernel.mainloop_transform = MainloopTransform::none;
  GemmConfig copied = in_kernel;
  copied.mainloop_transform = MainloopTransform::kmajor_tf32;
  EXPECT_FALSE(gemm_config_rejection(p, in_kernel).has_value());
  EXPECT_FALSE(gemm_config_rejection(p, copied).has_value());
  EXPECT_NE(in_kernel.id(), copied.id());
  // Row-major A and B: CUTLASS's builder would swap A and B itself (computing D^T, measured wrong on the H100), so
  // FACT transposes the problem (its A is B^T, column-major over the same memory) or copies B K-major; the plain
  // config says why it cannot run.
  auto nn_problem = GemmProblem::packed(2048, 2048, 2048, 1, Numerics::tf32, Arch::sm90, /*b_column=*/false);
  auto nn = all_configs(nn_problem);
  transforms.clear();
  for (const auto& r : nn.ranked)
    if (r.config.api == KernelApi::cutlass3_collective) transforms.insert(r.config.mainloop_transform);
  EXPECT_EQ(transforms, (std::set<MainloopTransform>{MainloopTransform::transposed, MainloopTransform::kmajor_tf32}));
  GemmConfig swapped = nn.ranked.front().config;
  swapped.mainloop_transform = MainloopTransform::none;
  auto why = gemm_config_rejection(nn_problem, swapped);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("kmajor_tf32"), std::string::npos) << *why;
  // The transposed problem's M and N are the caller's N and M: a bias (a vector along N) keeps the pre-pass.
  auto biased = GemmProblem::packed(2048, 2048, 2048, 1, Numerics::tf32, Arch::sm90, false, Epilogue::named("bias"));
  int sm90 = 0;
  for (const auto& r : all_configs(biased).ranked)
    if (r.config.api == KernelApi::cutlass3_collective) {
      ++sm90;
      EXPECT_EQ(r.config.mainloop_transform, MainloopTransform::kmajor_tf32) << r.config.summary();
    }
  EXPECT_GT(sm90, 0);
  GemmConfig t = swapped;
  t.mainloop_transform = MainloopTransform::transposed;
  EXPECT_FALSE(gemm_config_rejection(nn_problem, t).has_value());
  t.epilogue = Epilogue::named("bias");
  EXPECT_TRUE(gemm_config_rejection(biased, t).has_value());
  // Its tiles cover the caller's N along their M: 96 x 4096 in 128x256 tiles wastes 25% one way, 62.5% the other.
  auto flat = GemmProblem::packed(96, 4096, 2048, 1, Numerics::tf32, Arch::sm90, false);
  GemmConfig tile = nn.ranked.front().config;
  tile.threadblock = {128, 256, 32};
  tile.mainloop_transform = MainloopTransform::kmajor_tf32;
  EXPECT_DOUBLE_EQ(estimate_gemm_config(flat, tile, 132).tile_efficiency, 0.75);
  tile.mainloop_transform = MainloopTransform::transposed;
  EXPECT_DOUBLE_EQ(estimate_gemm_config(flat, tile, 132).tile_efficiency, 96.0 / 256.0);
  // An operand TMA cannot read (rows not 16-byte aligned) has only the pre-pass.
  auto odd = with_column_major_a(GemmProblem::packed(2046, 2048, 2048, 1, Numerics::tf32, Arch::sm90, true));
  sm90 = 0;
  for (const auto& r : all_configs(odd).ranked)
    if (r.config.api == KernelApi::cutlass3_collective) {
      ++sm90;
      EXPECT_EQ(r.config.mainloop_transform, MainloopTransform::kmajor_tf32) << r.config.summary();
    }
  EXPECT_GT(sm90, 0);
  // Already K-major: no pre-pass.
  auto nt = all_configs(GemmProblem::packed(2048, 2048, 2048, 1, Numerics::tf32, Arch::sm90, /*b_column=*/true));
  EXPECT_EQ(nt.ranked.front().config.api, KernelApi::cutlass3_collective);
  for (const auto& r : nt.ranked) EXPECT_EQ(r.config.mainloop_transform, MainloopTransform::none) << r.config.summary();
  // bf16 takes either major-ness through TMA + wgmma.
  auto bf16_nn = all_configs(GemmProblem::packed(2048, 2048, 2048, 1, Numerics::bf16, Arch::sm90, false));
  EXPECT_EQ(bf16_nn.ranked.front().config.api, KernelApi::cutlass3_collective);
  EXPECT_EQ(bf16_nn.ranked.front().config.mainloop_transform, MainloopTransform::none);
}

TEST(GemmConfigSpace, Sm90SquareFp32GetsTf32PrepassVariantsRankedFirst) {
  // The measured case: 4096^3 fp32, A and B row-major. 3xtf32 on 2.x mma.sync lost to cuBLAS SGEMM, so the
  // split pre-pass + 3.x wgmma variant must lead and the 2.x kernels stay in the space behind it.
  for (Numerics n : {Numerics::x3tf32, Numerics::tf32}) {
    auto p = GemmProblem::packed(4096, 4096, 4096, 1, n, Arch::sm90, /*b_column=*/false);
    auto s = all_configs(p);
    // tf32's best-ranked pre-pass config (the register-sourced mainloop competes with it, tested above).
    MainloopTransform expected = n == Numerics::x3tf32 ? MainloopTransform::split3_tf32 : MainloopTransform::kmajor_tf32;
    auto with_expected = std::find_if(s.ranked.begin(), s.ranked.end(),
                                      [&](const RankedGemmConfig& r) { return r.config.mainloop_transform == expected; });
    ASSERT_NE(with_expected, s.ranked.end());
    const GemmConfig& top = with_expected->config;
    SCOPED_TRACE(top.summary());
    EXPECT_EQ(top.api, KernelApi::cutlass3_collective);
    EXPECT_EQ(top.mainloop_transform, expected);
    EXPECT_EQ(top.instruction.k, 8);  // wgmma tf32
    EXPECT_EQ(top.threadblock.k, 32);
    EXPECT_EQ(top.to_json().at("mainloop_transform"), to_string(expected));
    EXPECT_EQ(GemmConfig::from_json(top.to_json()).mainloop_transform, expected);
    GemmConfig plain = top;
    plain.mainloop_transform = MainloopTransform::none;
    EXPECT_NE(plain.id(), top.id());
    EXPECT_FALSE(plain.to_json().contains("mainloop_transform")) << "ids of configs without a transform must not move";
    bool cutlass2 = false;
    for (const auto& r : s.ranked) {
      if (r.config.api == KernelApi::cutlass2_universal) {
        cutlass2 = true;
        EXPECT_LT(r.score, s.ranked.front().score);
      } else if (n == Numerics::x3tf32) {  // or A split in registers (B is copied either way)
        EXPECT_TRUE(r.config.mainloop_transform == expected ||
                    r.config.mainloop_transform == MainloopTransform::split3_rmem_a) << r.config.summary();
      }
    }
    EXPECT_TRUE(cutlass2);
  }
  // A transform must match the numerics.
  auto p = GemmProblem::packed(4096, 4096, 4096, 1, Numerics::tf32, Arch::sm90, false);
  GemmConfig c = all_configs(p).ranked.front().config;
  c.mainloop_transform = MainloopTransform::split3_tf32;
  EXPECT_TRUE(gemm_config_rejection(p, c).has_value());
}

TEST(GemmConfigSpace, PrepassTakesUnalignedOperandsAndUnalignedDStoresFromRegisters) {
  // K = 2046: A rows are 8-byte aligned only; the pre-pass reads them, TMA reads its aligned copies.
  auto p = GemmProblem::packed(2048, 2048, 2046, 1, Numerics::x3tf32, Arch::sm90, false);
  auto s = all_configs(p);
  EXPECT_EQ(s.ranked.front().config.mainloop_transform, MainloopTransform::split3_tf32);
  EXPECT_EQ(s.ranked.front().config.alignment_a, 2);
  EXPECT_NE(s.ranked.front().config.epilogue_schedule, EpilogueSchedule::NoSmemWarpSpecialized) << "D is aligned";
  // N = 50257 (GPT-2's logits, K-major weight): D's rows are not 16-byte aligned, so TMA cannot store them; the
  // 3.x kernels store the linear epilogue from registers and rank above 2.x mma.sync.
  auto logits_problem = GemmProblem::packed(4096, 50257, 768, 1, Numerics::x3tf32, Arch::sm90, true);
  auto logits = all_configs(logits_problem);
  const GemmConfig& best = logits.ranked.front().config;
  EXPECT_EQ(best.api, KernelApi::cutlass3_collective) << best.summary();
  EXPECT_EQ(best.epilogue_schedule, EpilogueSchedule::NoSmemWarpSpecialized) << best.summary();
  for (const auto& r : logits.ranked)
    if (r.config.api == KernelApi::cutlass3_collective) EXPECT_EQ(r.config.alignment_d, 1) << r.config.summary();
  GemmConfig tma = best;
  tma.epilogue_schedule = EpilogueSchedule::TmaWarpSpecializedCooperative;
  EXPECT_TRUE(gemm_config_rejection(logits_problem, tma).has_value()) << "TMA stores need aligned rows";
  // Other epilogues have no register-store form: such a D keeps 2.x kernels only.
  auto odd_bias = all_configs(GemmProblem::packed(2048, 2046, 2048, 1, Numerics::x3tf32, Arch::sm90, false,
                                                  Epilogue::named("bias")));
  for (const auto& r : odd_bias.ranked) EXPECT_EQ(r.config.api, KernelApi::cutlass2_universal) << r.config.summary();
}

TEST(GemmConfigSpace, LargeTilesAreMeasuredWhereTheirWavesComeOutAlike) {
  // KernelBench level 2's 1024 x 8192 x 8192 Linear in tf32: 128x256 and 256x128 tiles fill the waves as well as
  // 128x128 ones and load less per flop, so --top 2 measures one of them, not two 128x128 kernels.
  auto p = GemmProblem::packed(1024, 8192, 8192, 1, Numerics::tf32, Arch::sm90, true);
  auto s = enumerate_gemm_configs(p, {.top_n = 2});
  std::set<std::pair<int, int>> tiles;
  for (const auto& r : s.ranked) tiles.insert({r.config.threadblock.m, r.config.threadblock.n});
  EXPECT_TRUE(tiles.count({128, 256}) || tiles.count({256, 128})) << s.ranked.front().config.summary();
  // Few tiles (256 x 256 x 131072): the waves decide, not the tile's reuse.
  auto few = enumerate_gemm_configs(GemmProblem::packed(256, 256, 131072, 1, Numerics::tf32, Arch::sm90, true), {.top_n = 1});
  auto tb = few.ranked.front().config.threadblock;
  EXPECT_LE(tb.m * tb.n, 128 * 128) << few.ranked.front().config.summary();
  // The 3xTF32 split keeps 128x128 first (its 128x256 kernel measured slower at BERT's 8192 x 3072 x 768).
  auto split = enumerate_gemm_configs(GemmProblem::packed(8192, 3072, 768, 1, Numerics::x3tf32, Arch::sm90, true),
                                      {.top_n = 100000});
  auto first_split = std::find_if(split.ranked.begin(), split.ranked.end(), [](const RankedGemmConfig& r) {
    return r.config.mainloop_transform == MainloopTransform::split3_tf32;
  });
  ASSERT_NE(first_split, split.ranked.end());
  EXPECT_EQ(first_split->config.threadblock.m * first_split->config.threadblock.n, 128 * 128) << first_split->config.summary();
}

TEST(GemmConfigSpace, Sm90RunTimeVariantsShareOneKernelAndKeepTheirOwnIds) {
  // 4096 x 8192 bf16: more tiles than SMs (swizzles), and a raster order variant.
  auto p = GemmProblem::packed(4096, 8192, 4096, 1, Numerics::bf16, Arch::sm90, true);
  auto s = enumerate_gemm_configs(p, {.top_n = 1, .max_variants_per_kernel = 100});
  ASSERT_FALSE(s.ranked.empty());
  const std::string kernel = s.ranked.front().config.kernel_id();
  std::set<std::string> ids;
  std::set<int> swizzles;
  std::set<RasterOrder> explicit_orders;
  for (const auto& r : s.ranked) {
    EXPECT_EQ(r.config.kernel_id(), kernel) << r.config.summary();
    EXPECT_EQ(r.config.kernel_config().to_json(), s.ranked.front().config.kernel_config().to_json());
    ids.insert(r.config.id());
    swizzles.insert(r.config.swizzle);
    if (r.config.raster_order != RasterOrder::heuristic) explicit_orders.insert(r.config.raster_order);
    auto args = r.config.run_time_arguments();
    EXPECT_EQ(args.at("swizzle"), r.config.swizzle);
    EXPECT_EQ(args.at("raster"), r.config.raster_order == RasterOrder::along_n ? 2
                                 : r.config.raster_order == RasterOrder::along_m ? 1 : 0);
  }
  EXPECT_EQ(ids.size(), s.ranked.size()) << "each variant keeps its own id (the tuning database's key)";
  EXPECT_EQ(swizzles, (std::set<int>{1, 2, 4, 8}));
  // One explicit order: the one CUTLASS's heuristic does not pick (its own is not measured twice).
  EXPECT_EQ(explicit_orders.size(), 1u);
  // The kernel config drops the knobs; an older record's id (no raster_order) is unchanged by the new field.
  GemmConfig v = s.ranked.back().config;
  EXPECT_EQ(v.kernel_config().swizzle, 1);
  EXPECT_EQ(v.kernel_config().raster_order, RasterOrder::heuristic);
  EXPECT_FALSE(s.ranked.front().config.kernel_config().to_json().contains("raster_order"));
  EXPECT_EQ(GemmConfig::from_json(v.to_json()).id(), v.id());
  // A large-K problem's stream-K kernel carries split-K and reduction variants at run time too.
  auto lk = enumerate_gemm_configs(GemmProblem::packed(256, 256, 131072, 1, Numerics::bf16, Arch::sm90, true),
                                   {.top_n = 1000, .max_variants_per_kernel = 100});
  bool split_variant = false;
  for (const auto& r : lk.ranked)
    if (r.config.api == KernelApi::cutlass3_collective && r.config.split_k_mode == SplitKMode::serial) {
      split_variant = true;
      EXPECT_EQ(r.config.kernel_config().split_k_slices, 1);
      EXPECT_EQ(r.config.kernel_config().tile_scheduler, TileScheduler::stream_k);
      EXPECT_EQ(r.config.run_time_arguments().at("splits"), r.config.split_k_slices);
      EXPECT_EQ(r.config.run_time_arguments().at("reduction"), r.config.nondeterministic_reduction ? 1 : 0);
    }
  EXPECT_TRUE(split_variant);
  // 2.x kernels compile every knob in: each config is its own kernel, with no run-time arguments.
  auto sm80 = enumerate_gemm_configs(GemmProblem::packed(4096, 4096, 4096, 1, Numerics::bf16, Arch::sm80, true));
  for (const auto& r : sm80.ranked) {
    EXPECT_EQ(r.config.kernel_id(), r.config.id());
    EXPECT_TRUE(r.config.run_time_arguments().empty());
  }
}

TEST(GemmConfigSpace, TheKindsOfKernelTakeTurnsBeforeASecondKernelOfAKind) {
  // tf32 with column-major A: the register-sourced and the pre-pass mainloops, each in both schedules, are four
  // kinds; four kernels are one of each, not the four best-scored tiles of one kind.
  auto p = with_column_major_a(GemmProblem::packed(4096, 4096, 4096, 1, Numerics::tf32, Arch::sm90, true));
  auto s = enumerate_gemm_configs(p, {.top_n = 4});
  std::set<std::string> kernels;
  std::set<MainloopTransform> transforms;
  std::set<KernelSchedule> schedules;
  for (const auto& r : s.ranked) {
    kernels.insert(r.config.kernel_id());
    transforms.insert(r.config.mainloop_transform);
    schedules.insert(r.config.kernel_schedule);
  }
  EXPECT_EQ(kernels.size(), 4u);
  EXPECT_EQ(transforms, (std::set<MainloopTransform>{MainloopTransform::none, MainloopTransform::kmajor_tf32}));
  EXPECT_EQ(schedules.size(), 2u);
  // Eight: each kind's second kernel is another tile shape, not another cluster of its first.
  std::map<std::string, std::set<std::string>> tiles_of_kind;
  for (const auto& r : enumerate_gemm_configs(p, {.top_n = 8}).ranked)
    tiles_of_kind[to_string(r.config.mainloop_transform) + to_string(r.config.kernel_schedule)].insert(
        std::to_string(r.config.threadblock.m) + "x" + std::to_string(r.config.threadblock.n));
  for (const auto& [kind, tiles] : tiles_of_kind) EXPECT_EQ(tiles.size(), 2u) << kind;
  // mma.sync kernels (half of wgmma's rate on sm90) wait until the wgmma kinds run out.
  auto bf16 = GemmProblem::packed(4096, 4096, 4096, 1, Numerics::bf16, Arch::sm90, true);
  for (const auto& r : enumerate_gemm_configs(bf16, {.top_n = 8}).ranked)
    EXPECT_EQ(r.config.api, KernelApi::cutlass3_collective) << r.config.summary();
  // One kernel: the best-scored one, with its variants.
  auto best = enumerate_gemm_configs(p, {.top_n = 100000}).ranked.front().config;
  auto one = enumerate_gemm_configs(p, {.top_n = 1});
  EXPECT_EQ(one.ranked.front().config.id(), best.id());
  for (const auto& r : one.ranked) EXPECT_EQ(r.config.kernel_id(), best.kernel_id());
}

TEST(GemmConfigSpace, TopNIsRankedAndRespectsConstraints) {
  auto p = GemmProblem::packed(1024, 4096, 2048, 1, Numerics::bf16, Arch::sm90, true);
  auto s = enumerate_gemm_configs(p, {.top_n = 8});
  std::set<std::string> kernels;
  for (const auto& r : s.ranked) kernels.insert(r.config.kernel_id());
  EXPECT_EQ(kernels.size(), 8u) << "top_n counts kernels, each with its run-time variants";
  EXPECT_GT(s.ranked.size(), kernels.size());
  for (size_t i = 1; i < s.ranked.size(); ++i) EXPECT_GE(s.ranked[i - 1].score, s.ranked[i].score);
  for (const auto& r : s.ranked) {
    EXPECT_FALSE(gemm_config_rejection(p, r.config).has_value());
    if (r.config.kernel_schedule == KernelSchedule::KernelTmaWarpSpecializedCooperative)
      EXPECT_EQ(r.config.threadblock.m % 128, 0);
  }
  // fp32 on sm90 comes from 2.x SIMT kernels compiled for sm_90a; 3xtf32 from 3.x behind a split pre-pass.
  auto q = enumerate_gemm_configs(GemmProblem::packed(1024, 1024, 1024, 1, Numerics::fp32, Arch::sm90));
  for (const auto& r : q.ranked) {
    EXPECT_EQ(r.config.api, KernelApi::cutlass2_universal);
    EXPECT_EQ(r.config.arch, Arch::sm90);
  }
  auto x3 = enumerate_gemm_configs(GemmProblem::packed(1024, 1024, 1024, 1, Numerics::x3tf32, Arch::sm90));
  for (const auto& r : x3.ranked)
    if (r.config.api == KernelApi::cutlass3_collective) EXPECT_TRUE(r.config.splits_3xtf32()) << r.config.summary();
  // Batched problems get no 2.x split-K (batch_count means batches there).
  auto b = all_configs(GemmProblem::packed(128, 512, 256, 128, Numerics::tf32, Arch::sm80));
  for (const auto& r : b.ranked) EXPECT_EQ(r.config.split_k_mode, SplitKMode::none);
}

// 3xTF32 with K-major operands has two ways to split: the pre-pass (B' three times B, kept for a weight) and the
// register split (split3_rmem: the weight read once). A short A against a large weight is bound by the weight's
// bytes: the register split ranks first, and --top 2 measures its cooperative kernel and its 64-row ping-pong one
// (128-row ping-pong tiles are refused: two accumulators on one warpgroup). A compute-bound GEMM with a short A keeps
// the pre-pass split first.
TEST(GemmConfigSpace, ThreeTf32WeightBoundGemmsSplitInRegisters) {
  auto p = GemmProblem::packed(128, 32768, 32768, 1, Numerics::x3tf32, Arch::sm90, /*b_column=*/true);
  p.b.constant = true;
  auto two = enumerate_gemm_configs(p, {.top_n = 2});
  std::set<std::string> kernels;
  for (const auto& r : two.ranked) {
    EXPECT_EQ(r.config.mainloop_transform, MainloopTransform::split3_rmem) << r.config.summary();
    EXPECT_EQ(r.config.promotion_interval, 4) << "promoted every k-tile";
    EXPECT_EQ(r.config.tile_scheduler, TileScheduler::persistent);
    if (r.config.kernel_schedule == KernelSchedule::KernelTmaWarpSpecializedPingpong) EXPECT_EQ(r.config.threadblock.m, 64);
    kernels.insert(r.config.kernel_id());
  }
  EXPECT_EQ(kernels.size(), 2u);
  GemmConfig c = two.ranked.front().config;
  EXPECT_EQ(c.smem_bytes_per_stage(), (c.threadblock.m + 2 * c.threadblock.n) * 32 * 4) << "B' tiles are twice B's";

  // Compute-bound with a kept weight and a short copy of A (level2/12's 1024 x 8192 x 8192): the pre-pass split first.
  auto square = GemmProblem::packed(1024, 8192, 8192, 1, Numerics::x3tf32, Arch::sm90, true);
  square.b.constant = true;
  auto all = enumerate_gemm_configs(square, {.top_n = 100000});
  EXPECT_EQ(all.ranked.front().config.mainloop_transform, MainloopTransform::split3_tf32);
  EXPECT_TRUE(std::any_of(all.ranked.begin(), all.ranked.end(), [](const RankedGemmConfig& r) {
    return r.config.mainloop_transform == MainloopTransform::split3_rmem;
  }));

  // Refused with a reason: a row-major B (not read in place), a 128-row ping-pong tile.
  c.layout_b = MatrixLayout::row;
  EXPECT_NE(gemm_config_rejection(p, c).value_or(""), "");
  c = two.ranked.front().config;
  c.kernel_schedule = KernelSchedule::KernelTmaWarpSpecializedPingpong;
  c.epilogue_schedule = EpilogueSchedule::TmaWarpSpecialized;
  c.threadblock.m = 128;
  EXPECT_NE(gemm_config_rejection(p, c).value_or("").find("64-row tiles"), std::string::npos);
  auto row_b = GemmProblem::packed(128, 32768, 32768, 1, Numerics::x3tf32, Arch::sm90, /*b_column=*/false);
  for (const auto& r : enumerate_gemm_configs(row_b, {.top_n = 100000}).ranked)
    EXPECT_NE(r.config.mainloop_transform, MainloopTransform::split3_rmem);
}

// A long K over few tiles (KernelBench level1/6's 256 x 256 x 131072, two activations): the register split of A
// (no copy of A) decomposes K by stream-K or split-K like the other cooperative kernels, and --top 4 measures it
// beside the 2.x mma.sync stream-K kernels (which ran it at 0.68 ms against cuBLAS fp32's 0.34 on the H200).
TEST(GemmConfigSpace, ThreeTf32RegisterSplitDecomposesALongK) {
  auto p = GemmProblem::packed(256, 256, 131072, 1, Numerics::x3tf32, Arch::sm90, /*b_column=*/false);
  auto s = enumerate_gemm_configs(p, {.top_n = 4});
  std::set<std::string> rmem_kernels;
  bool split_k = false;
  for (const auto& r : s.ranked) {
    if (r.config.mainloop_transform != MainloopTransform::split3_rmem_a) continue;
    EXPECT_EQ(r.config.tile_scheduler, TileScheduler::stream_k) << r.config.summary();
    EXPECT_EQ(r.config.kernel_schedule, KernelSchedule::KernelTmaWarpSpecializedCooperative);
    rmem_kernels.insert(r.config.kernel_id());
    split_k |= r.config.split_k_mode == SplitKMode::serial && r.config.split_k_slices >= 16;
  }
  EXPECT_GE(rmem_kernels.size(), 1u);
  EXPECT_TRUE(split_k) << "a one-wave split-K variant of the register split";
  // A 128 x 256 register split leaves one stage beside the epilogue (it hung on the H200): refused, 128 x 128 kept.
  auto all = enumerate_gemm_configs(p, {.top_n = 100000});
  EXPECT_TRUE(any_pruned_for(all, "two mainloop stages"));
  for (const auto& r : all.ranked)
    if (r.config.splits_in_registers())
      EXPECT_FALSE(r.config.threadblock.m == 128 && r.config.threadblock.n == 256) << r.config.summary();
  EXPECT_TRUE(std::any_of(all.ranked.begin(), all.ranked.end(), [](const RankedGemmConfig& r) {
    return r.config.splits_in_registers() && r.config.threadblock.m == 128 && r.config.threadblock.n == 128;
  }));
  // Stream-K stays the cooperative schedule's: a ping-pong register split is refused for it.
  GemmConfig c = s.ranked.front().config;
  for (const auto& r : s.ranked)
    if (r.config.mainloop_transform == MainloopTransform::split3_rmem_a) c = r.config;
  c.kernel_schedule = KernelSchedule::KernelTmaWarpSpecializedPingpong;
  c.epilogue_schedule = EpilogueSchedule::TmaWarpSpecialized;
  c.threadblock.m = 64;
  c.warp.m = 64;
  EXPECT_NE(gemm_config_rejection(p, c).value_or("").find("cooperative"), std::string::npos);
}

// Two activations (B not a weight, row-major): the pre-pass split copies A three times and B three times every call;
// split3_rmem_a reads A in place and splits B only: --top 3 measures both (and the pre-pass's ping-pong kernel). The transposed register split needs
// a K-major B and is not offered. A column-major A has no operand to split in place but B (split3_rmem is refused too).
TEST(GemmConfigSpace, ThreeTf32SplitsTheRowMajorAInRegistersWhereBIsCopiedAnyway) {
  auto p = GemmProblem::packed(4096, 4096, 4096, 1, Numerics::x3tf32, Arch::sm90, /*b_column=*/false);
  auto s = enumerate_gemm_configs(p, {.top_n = 3});
  std::set<MainloopTransform> transforms;
  for (const auto& r : s.ranked) transforms.insert(r.config.mainloop_transform);
  EXPECT_EQ(transforms, (std::set<MainloopTransform>{MainloopTransform::split3_tf32, MainloopTransform::split3_rmem_a}));
  auto rmem_a = std::find_if(s.ranked.begin(), s.ranked.end(), [](const RankedGemmConfig& r) {
    return r.config.mainloop_transform == MainloopTransform::split3_rmem_a;
  });
  ASSERT_NE(rmem_a, s.ranked.end());
  GemmConfig c = rmem_a->config;
  EXPECT_FALSE(c.transposes_problem());
  c.layout_a = MatrixLayout::column;
  auto col_a = p;
  col_a.a.layout = MatrixLayout::column;
  EXPECT_NE(gemm_config_rejection(col_a, c).value_or("").find("row-major A"), std::string::npos);
  for (const auto& r : enumerate_gemm_configs(col_a, {.top_n = 100000}).ranked) EXPECT_FALSE(r.config.splits_in_registers());
}
