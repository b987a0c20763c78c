// The example index over the real CUTLASS examples in the installed wheel (skipped when CUTLASS is absent).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/error.h"
#include "core/paths.h"
#include "discover/example_index.h"

using namespace fact::discover;

namespace {

std::filesystem::path examples_dir() {
  try {
    return fact::cutlass_dir() / "examples";
  } catch (const fact::Error&) {
    return {};
  }
}

}  // namespace

TEST(ExampleIndexCutlass, HopperFusedAttentionOnSm90FindsHopperFmha) {
  auto dir = examples_dir();
  if (dir.empty()) GTEST_SKIP() << "CUTLASS wheel not installed";
  auto start = std::chrono::steady_clock::now();
  auto index = ExampleIndex::build(dir, fact::fact_home(), "sm90");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 2.0) << "indexing the CUTLASS examples must stay well under 2 s";
  EXPECT_GT(index.entries().size(), 80u);
  auto hits = index.search("hopper fused attention", 5);
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0].ref, "cutlass:88_hopper_fmha");
  for (const auto& h : hits) EXPECT_TRUE(std::find(h.arch.begin(), h.arch.end(), "sm90") != h.arch.end()) << h.ref;
}

TEST(ExampleIndexCutlass, ThreeXTf32OnSm80FindsExample27) {
  auto dir = examples_dir();
  if (dir.empty()) GTEST_SKIP() << "CUTLASS wheel not installed";
  auto hits = ExampleIndex::build(dir, fact::fact_home(), "sm80").search("3xtf32 fast accurate", 5);
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0].ref.rfind("cutlass:27_ampere_3xtf32", 0), 0u) << hits[0].ref;
}

TEST(ExampleIndexCutlass, StreamKFindsAmpereStreamK) {
  auto dir = examples_dir();
  if (dir.empty()) GTEST_SKIP() << "CUTLASS wheel not installed";
  auto index = ExampleIndex::build(dir, fact::fact_home(), "");
  auto hits = index.search("stream-k", 5);
  auto it = std::find_if(hits.begin(), hits.end(),
                         [](const ExampleHit& h) { return h.ref == "cutlass:47_ampere_gemm_universal_streamk"; });
  EXPECT_NE(it, hits.end());
  // Every curated ref resolves, and the metadata lists every numbered example in this wheel.
  for (const auto& e : index.entries())
    if (e.ref.rfind("cutlass:", 0) == 0) EXPECT_TRUE(e.curated) << e.ref << " is missing from data/examples/cutlass_examples.json";
}
