// The example index on a tiny fixture (tests/cpp/data/examples_fixture): tokenizer, BM25, metadata,
// arch filter, ranking and ref resolution, all deterministic and independent of the installed CUTLASS.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "discover/bm25_index.h"
#include "discover/code_tokenizer.h"
#include "discover/example_index.h"

namespace fs = std::filesystem;
using namespace fact::discover;

namespace {

const fs::path kFixture = fs::path(FACT_TEST_DATA) / "examples_fixture";

ExampleIndex fixture_index(const std::string& arch, ArchMatch match = ArchMatch::exact) {
  return ExampleIndex::build(kFixture / "cutlass_examples", kFixture / "home", arch, match);
}

std::vector<std::string> refs_of(const std::vector<ExampleHit>& hits) {
  std::vector<std::string> refs;
  for (const auto& h : hits) refs.push_back(h.ref);
  return refs;
}

bool contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

}  // namespace

TEST(CodeTokenizer, SplitsIdentifiersAndDropsCommonWords) {
  auto tokens = tokenize_code("FP8Gemm sm90 fused_multi_head_attention stream-k #include the x HTTPServer");
  std::vector<std::string> expected = {"fp",   "gemm",  "fp8gemm",   "sm",     "90",      "sm90",  "fused", "multi",
                                       "head", "attention", "stream", "streamk", "http", "server", "httpserver"};
  EXPECT_EQ(tokens, expected);
  // The two spellings of stream-K meet on the same terms.
  auto camel = tokenize_code("StreamK");
  EXPECT_TRUE(contains(camel, "stream"));
  EXPECT_TRUE(contains(camel, "streamk"));
  EXPECT_TRUE(is_common_code_word("include"));
  EXPECT_FALSE(is_common_code_word("gemm"));
}

TEST(Bm25, RanksByFrequencyRarityAndLength) {
  Bm25Index index;
  index.add({"gemm", "gemm", "tile"});                             // 0: gemm twice
  index.add({"gemm", "tile"});                                     // 1: gemm once, short
  index.add({"gemm", "tile", "tile", "tile", "tile", "tile"});     // 2: gemm once, long
  index.add({"attention", "tile"});                                // 3: no gemm
  auto s = index.score({"gemm"});
  ASSERT_EQ(s.size(), 4u);
  EXPECT_GT(s[0], s[1]);  // more occurrences
  EXPECT_GT(s[1], s[2]);  // same count, shorter document
  EXPECT_EQ(s[3], 0.0);
  // A term in every document still scores above zero, but far below a rare one.
  auto common = index.score({"tile"});
  auto rare = index.score({"attention"});
  EXPECT_GT(common[3], 0.0);
  EXPECT_GT(rare[3], common[3]);
  EXPECT_EQ(index.score({"gemm", "gemm"}), s);  // repeated query terms count once
  EXPECT_EQ(index.document_frequency("tile"), 4u);
}

TEST(ExampleIndex, ReadsCuratedAndGuessedMetadata) {
  auto index = fixture_index("");
  std::vector<std::string> refs;
  for (const auto& e : index.entries()) refs.push_back(e.ref);
  // Numbered folders plus existing FACT kernels; common/, the absent example and fact:not_yet are not there.
  EXPECT_EQ(refs, (std::vector<std::string>{"cutlass:10_ampere_tf32_gemm", "cutlass:20_hopper_fmha",
                                            "cutlass:30_hopper_grouped_gemm", "cutlass:40_blackwell_conv",
                                            "fact:tiny_gemm"}));
  const ExampleEntry* grouped = index.find("cutlass:30_hopper_grouped_gemm");
  ASSERT_NE(grouped, nullptr);
  EXPECT_EQ(grouped->arch, std::vector<std::string>{"sm90"});  // "sm_90a" normalized
  EXPECT_TRUE(grouped->curated);
  const ExampleEntry* conv = index.find("cutlass:40_blackwell_conv");
  ASSERT_NE(conv, nullptr);
  EXPECT_FALSE(conv->curated);
  EXPECT_EQ(conv->arch, std::vector<std::string>{"sm100"});
  EXPECT_EQ(conv->family, "conv");
  EXPECT_EQ(conv->title, "blackwell conv");
  const ExampleEntry* fmha = index.find("cutlass:20_hopper_fmha");
  ASSERT_NE(fmha, nullptr);
  ASSERT_EQ(fmha->files.size(), 3u);  // README, the .cu and kernel/fmha_kernel.hpp
  EXPECT_EQ(fmha->files[0].filename(), "README.md");
  const ExampleEntry* tiny = index.find("fact:tiny_gemm");
  ASSERT_NE(tiny, nullptr);
  EXPECT_EQ(tiny->path, kFixture / "home" / "templates" / "tiny_gemm.cu.in");
  EXPECT_EQ(index.find("fact:not_yet"), nullptr);
}

TEST(ExampleIndex, RanksTheMatchingExampleFirstWithASnippet) {
  auto index = fixture_index("");
  auto hits = index.search("hopper fused attention", 5);
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0].ref, "cutlass:20_hopper_fmha");
  EXPECT_EQ(hits[0].family, "attention");
  EXPECT_NE(hits[0].snippet.find("attention"), std::string::npos) << hits[0].snippet;
  for (size_t i = 1; i < hits.size(); ++i) EXPECT_GE(hits[i - 1].score, hits[i].score);

  EXPECT_EQ(index.search("3xtf32 fast accurate", 1).at(0).ref, "cutlass:10_ampere_tf32_gemm");
  EXPECT_EQ(index.search("grouped gemm mixture of experts", 1).at(0).ref, "cutlass:30_hopper_grouped_gemm");
  EXPECT_EQ(index.search("bias gelu split-k", 1).at(0).ref, "fact:tiny_gemm");
  // A word only in a subfolder file still finds its example.
  EXPECT_EQ(index.search("producer warps", 1).at(0).ref, "cutlass:20_hopper_fmha");
  // Title words weigh more: "grouped" is in 30's title only, "gemm" in several bodies.
  EXPECT_EQ(index.search("grouped", 5).size(), 1u);
  EXPECT_EQ(index.search("gemm", 1, "attention").size(), 0u);  // family filter
  EXPECT_TRUE(index.search("no such words anywhere", 5).empty());
  EXPECT_EQ(index.search("gemm", 2).size(), 2u);  // top_k honoured
}

TEST(ExampleIndex, RankingIsDeterministic) {
  auto a = fixture_index("").search("gemm tensor cores", 10);
  auto b = fixture_index("").search("gemm tensor cores", 10);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].ref, b[i].ref);
    EXPECT_DOUBLE_EQ(a[i].score, b[i].score);
  }
}

TEST(ExampleIndex, LicenceBlockIsNotIndexed) {
  auto index = fixture_index("");
  EXPECT_TRUE(index.search("redistribution copyright", 5).empty());
}

TEST(ExampleIndex, ArchFilterExactAndCompatible) {
  auto sm90 = fixture_index("sm90");
  auto refs = refs_of(sm90.search("gemm attention conv tf32 grouped", 10));
  EXPECT_TRUE(contains(refs, "cutlass:20_hopper_fmha"));
  EXPECT_TRUE(contains(refs, "cutlass:30_hopper_grouped_gemm"));
  EXPECT_TRUE(contains(refs, "fact:tiny_gemm"));                  // lists sm90 itself
  EXPECT_FALSE(contains(refs, "cutlass:10_ampere_tf32_gemm"));   // sm80 only: exact excludes it
  EXPECT_FALSE(contains(refs, "cutlass:40_blackwell_conv"));

  auto compatible = fixture_index("sm_90a", ArchMatch::compatible);
  EXPECT_EQ(compatible.arch(), "sm90");
  refs = refs_of(compatible.search("gemm attention conv tf32 grouped", 10));
  EXPECT_TRUE(contains(refs, "cutlass:10_ampere_tf32_gemm"));    // sm80 code runs on sm90
  EXPECT_FALSE(contains(refs, "cutlass:40_blackwell_conv"));     // sm100 code does not

  // sm90 kernels are arch-specific: they do not run on sm100 even in compatible mode.
  EXPECT_FALSE(arch_matches({"sm90"}, "sm100", ArchMatch::compatible));
  EXPECT_TRUE(arch_matches({"sm80"}, "sm100", ArchMatch::compatible));
  EXPECT_FALSE(arch_matches({"sm90"}, "sm80", ArchMatch::compatible));
  EXPECT_EQ(normalize_arch("90"), "sm90");
  EXPECT_THROW(normalize_arch("hopper"), fact::Error);
  EXPECT_THROW(fixture_index("sm9x"), fact::Error);
}

TEST(ExampleIndex, FindAndResolveSeeAllArchs) {
  auto index = fixture_index("sm100");
  auto resolved = index.resolve_refs({"cutlass:20_hopper_fmha", "fact:tiny_gemm"});
  ASSERT_EQ(resolved.size(), 2u);
  EXPECT_EQ(resolved[0]->ref, "cutlass:20_hopper_fmha");
  EXPECT_FALSE(index.selects(*resolved[0]));
}

TEST(ExampleIndex, UnknownRefErrorListsNearNames) {
  auto index = fixture_index("");
  try {
    index.resolve_refs({"cutlass:20_hoper_fmha"});
    FAIL() << "expected an error";
  } catch (const fact::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("cutlass:20_hoper_fmha"), std::string::npos) << m;
    EXPECT_NE(m.find("nearest: cutlass:20_hopper_fmha"), std::string::npos) << m;
  }
  try {
    index.resolve_refs({"20_hopper_fmha"});
    FAIL() << "expected an error";
  } catch (const fact::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("cutlass:<example folder>"), std::string::npos) << m;
    EXPECT_NE(m.find("cutlass:20_hopper_fmha"), std::string::npos) << m;
  }
}

TEST(ExampleIndex, BadMetadataNamesFileAndField) {
  fs::path home = fs::temp_directory_path() / "fact_test_example_metadata";
  fact::write_file_atomic(home / "data" / "examples" / "cutlass_examples.json",
                          R"({"examples": {"10_ampere_tf32_gemm": {"arch": ["hopper9"], "family": "gemm", "title": "t"}}})");
  try {
    ExampleIndex::build(kFixture / "cutlass_examples", home, "");
    FAIL() << "expected an error";
  } catch (const fact::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("cutlass_examples.json"), std::string::npos) << m;
    EXPECT_NE(m.find("10_ampere_tf32_gemm"), std::string::npos) << m;
    EXPECT_NE(m.find("hopper9"), std::string::npos) << m;
  }
  EXPECT_THROW(ExampleIndex::build(kFixture / "no_such_folder", kFixture / "home", ""), fact::Error);
}
