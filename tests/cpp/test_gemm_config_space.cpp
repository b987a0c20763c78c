// GEMM problem description, config JSON/id, and the config space's enumeration, pruning and ranking.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "realize/gemm_config_space.h"

using namespace fact::realize;

namespace {

GemmConfigSpace all_configs(const GemmProblem& p) { return enumerate_gemm_configs(p, {.top_n = 100000}); }

bool any_pruned_for(const GemmConfigSpace& s, const std::string& words) {
  for (auto& [why, n] : s.pruned)
    if (why.find(words) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(GemmProblem, NamesRoundTripAndErrorsListChoices) {
  for (auto n : {Numerics::fp32, Numerics::tf32, Numerics::x3tf32, Numerics::bf16, Numerics::fp16})
    EXPECT_EQ(numerics_from_string(to_string(n)), n);
  EXPECT_EQ(to_string(Numerics::x3tf32), "3xtf32");
  for (auto e : {Epilogue::none, Epilogue::bias, Epilogue::bias_relu, Epilogue::bias_silu, Epilogue::bias_gelu_erf,
                 Epilogue::bias_gelu_tanh, Epilogue::bias_residual})
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

TEST(GemmConfigSpace, Sm90Tf32NeedsKMajorOperands) {
  auto nn = all_configs(GemmProblem::packed(2048, 2048, 2048, 1, Numerics::tf32, Arch::sm90, /*b_column=*/false));
  EXPECT_TRUE(any_pruned_for(nn, "K-major"));
  for (const auto& r : nn.ranked) EXPECT_EQ(r.config.api, KernelApi::cutlass2_universal) << r.config.summary();
  auto nt = all_configs(GemmProblem::packed(2048, 2048, 2048, 1, Numerics::tf32, Arch::sm90, /*b_column=*/true));
  EXPECT_EQ(nt.ranked.front().config.api, KernelApi::cutlass3_collective);
  // bf16 takes either major-ness through TMA + wgmma.
  auto bf16_nn = all_configs(GemmProblem::packed(2048, 2048, 2048, 1, Numerics::bf16, Arch::sm90, false));
  EXPECT_EQ(bf16_nn.ranked.front().config.api, KernelApi::cutlass3_collective);
}

TEST(GemmConfigSpace, TopNIsRankedAndRespectsConstraints) {
  auto p = GemmProblem::packed(1024, 4096, 2048, 1, Numerics::bf16, Arch::sm90, true);
  auto s = enumerate_gemm_configs(p, {.top_n = 8});
  ASSERT_EQ(s.ranked.size(), 8u);
  for (size_t i = 1; i < s.ranked.size(); ++i) EXPECT_GE(s.ranked[i - 1].score, s.ranked[i].score);
  for (const auto& r : s.ranked) {
    EXPECT_FALSE(gemm_config_rejection(p, r.config).has_value());
    if (r.config.kernel_schedule == KernelSchedule::KernelTmaWarpSpecializedCooperative)
      EXPECT_EQ(r.config.threadblock.m % 128, 0);
  }
  // fp32 and 3xtf32 on sm90 come from 2.x kernels compiled for sm_90a.
  for (Numerics n : {Numerics::fp32, Numerics::x3tf32}) {
    auto q = enumerate_gemm_configs(GemmProblem::packed(1024, 1024, 1024, 1, n, Arch::sm90));
    for (const auto& r : q.ranked) {
      EXPECT_EQ(r.config.api, KernelApi::cutlass2_universal);
      EXPECT_EQ(r.config.arch, Arch::sm90);
    }
  }
  // Batched problems get no 2.x split-K (batch_count means batches there).
  auto b = all_configs(GemmProblem::packed(128, 512, 256, 128, Numerics::tf32, Arch::sm80));
  for (const auto& r : b.ranked) EXPECT_EQ(r.config.split_k_mode, SplitKMode::none);
}
