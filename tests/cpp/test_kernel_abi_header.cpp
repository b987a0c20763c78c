// kernel_abi.h rendered from the data: every family's struct in registry order, malformed "abi" sections refused
// with an Error naming the family and the field, the rendered text naming the folder nvcc includes (so the
// kernel build cache key follows the header), and the layout of ABI version 1 kept.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "agent/kernel_refiner.h"
#include "discover/rowwise_fragment.h"
#include "core/error.h"
#include "core/files.h"
#include "kernel_abi.h"  // rendered by `fact ops abi-header` (tests/cpp/CMakeLists.txt)
#include "realize/families/gemm/epilogue_tree.h"
#include "realize/kernel_abi_header.h"
#include "realize/kernel_builder.h"
#include "realize/kernel_family.h"
#include "realize/nvcc_command.h"

namespace fs = std::filesystem;
using namespace fact;
using namespace fact::realize;
using nlohmann::json;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The Error that parsing `abi` as rope's section throws ("" when it parses).
std::string rope_abi_error(const json& abi) {
  try {
    parse_family_abi("rope", abi);
  } catch (const fact::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(KernelAbiHeader, MalformedAbiSectionIsRefusedNamingFamilyAndField) {
  const json good = fact::realize::family_data("rope").at("abi");
  ASSERT_EQ(rope_abi_error(good), "");
  auto with = [&](const json::json_pointer& at, const json& value) {
    json abi = good;
    abi[at] = value;
    return rope_abi_error(abi);
  };
  std::string e = with("/fields/5/type"_json_pointer, "int16");
  EXPECT_TRUE(contains(e, "kernel family 'rope'") && contains(e, "abi.fields[5] (\"x_batch_stride\").type") &&
              contains(e, "\"int16\" is not a type") && contains(e, "int64"))
      << e;
  e = with("/fields/5/type"_json_pointer, "int64[FACT_ROPE_MAX]");
  EXPECT_TRUE(contains(e, "'rope'") && contains(e, "x_batch_stride") && contains(e, "FACT_ROPE_MAX")) << e;
  e = with("/fields/6/name"_json_pointer, "x_batch_stride");
  EXPECT_TRUE(contains(e, "'rope'") && contains(e, "abi.fields[6] (\"x_batch_stride\"): a second field")) << e;
  e = with("/fields/0"_json_pointer, json{{"type", "int64"}});
  EXPECT_TRUE(contains(e, "'rope'") && contains(e, "abi.fields[0].name")) << e;
  e = with("/fields/0/width"_json_pointer, 8);
  EXPECT_TRUE(contains(e, "abi.fields[0].width: unknown key")) << e;
  e = with("/functions"_json_pointer, json{"can_implement", "describe"});
  EXPECT_TRUE(contains(e, "'rope'") && contains(e, "abi.functions: lacks \"run\"")) << e;
  e = with("/functions/0"_json_pointer, "launch");
  EXPECT_TRUE(contains(e, "abi.functions[0]: \"launch\" is not one of can_implement, workspace_bytes")) << e;
  e = with("/doc/0"_json_pointer, "ends the comment */ early");
  EXPECT_TRUE(contains(e, "'rope'") && contains(e, "abi.doc[0]")) << e;
  e = with("/struct"_json_pointer, "Fact Rope");
  EXPECT_TRUE(contains(e, "'rope'") && contains(e, "abi.struct")) << e;
  e = with("/constants"_json_pointer, json{{"FACT_ROPE_MAX", 0}});
  EXPECT_TRUE(contains(e, "abi.constants.FACT_ROPE_MAX: 0 is not an integer >= 1")) << e;
  e = rope_abi_error(nullptr);
  EXPECT_TRUE(contains(e, "kernel family 'rope'") && contains(e, "\"abi\" is missing")) << e;
}

TEST(KernelAbiHeader, HeaderHasTheSharedPartsThenEveryFamilysStructInRegistryOrder) {
  const std::string h = kernel_abi_header();
  EXPECT_TRUE(contains(h, "#define FACT_KERNEL_ABI_VERSION " + std::to_string(kernel_abi_version())));
  EXPECT_TRUE(contains(h, "FACT_ERR_UNSUPPORTED = 5"));
  size_t last = 0;
  for (const auto* family : kernel_families()) {
    FamilyAbi abi = family_abi(family->name());
    size_t at = h.find(render_family_abi(abi));
    ASSERT_NE(at, std::string::npos) << family->name();
    EXPECT_GT(at, last) << family->name() << " out of registry order";
    last = at;
    EXPECT_TRUE(contains(h, "} " + abi.struct_name + ";"));
  }
  // Members, comments and exports as the data says.
  EXPECT_TRUE(contains(h, "  const void* c;") && contains(h, "/* source for beta; may be null when beta == 0 */"));
  EXPECT_TRUE(contains(h, "Exported by each gemm kernel: fact_<id>_can_implement, fact_<id>_workspace_bytes, "
                          "fact_<id>_prepared_b_bytes, fact_<id>_prepare_b, fact_<id>_run, fact_<id>_describe."));
  EXPECT_TRUE(contains(h, "Exported by each rope kernel: fact_<id>_can_implement, fact_<id>_run, fact_<id>_describe."));
}

TEST(KernelAbiHeader, RowwiseStructIsWhatTheAgentQuotes) {
  const std::string text = render_family_abi(family_abi("rowwise"));
  EXPECT_EQ(fact::agent::rowwise_abi_text(), text);
  EXPECT_TRUE(contains(text, "/* Row-wise chain kernels (generated from the IR, src/realize/families/rowwise/, or by the agent"));
  EXPECT_TRUE(contains(text, "#define FACT_ROWWISE_MAX_INPUTS 8\ntypedef struct FactRowwiseArgs {"));
  EXPECT_TRUE(contains(text, "  const void* inputs[FACT_ROWWISE_MAX_INPUTS];"));
  EXPECT_TRUE(contains(text, "} FactRowwiseArgs;"));
  EXPECT_EQ(fact::discover::kRowwiseMaxInputs, FACT_ROWWISE_MAX_INPUTS);
}

// Sizes of the ABI's structs on LP64 (every offset is checked against the ctypes mirror by
// tests/python/test_measure.py): a change of layout must bump the version. Version 2 added FactGemmArgs::vectors
// (the epilogue's vec<i> slots) after residual, version 3 FactGemmArgs::prepared_b (a kept copy of B) after them,
// version 4 FactConvArgs::transposed after dilation, version 5 FactConvArgs::groups after transposed, version 6
// FactConvArgs::channels_last (which tensors are in channels-last order) after groups, version 7 FactAttentionArgs's
// mask (pointer, strides, kind) after causal, version 8 FactGemmArgs's tile scheduler knobs (swizzle, raster,
// splits, reduction) after stream, version 9 FactAttentionArgs's workspace (a masked call's look at its mask) after
// mask_kind, version 10 FactRowwiseArgs's 8 inputs (FACT_ROWWISE_MAX_INPUTS: a BatchNorm's four vectors beside x).
TEST(KernelAbiHeader, VersionTenLayoutIsKept) {
  ASSERT_EQ(FACT_KERNEL_ABI_VERSION, 10);
  EXPECT_EQ(offsetof(FactConvArgs, transposed), 168u);
  EXPECT_EQ(offsetof(FactConvArgs, groups), 176u);
  EXPECT_EQ(offsetof(FactConvArgs, channels_last), 184u);
  EXPECT_EQ(offsetof(FactConvArgs, x), 192u);
  EXPECT_EQ(sizeof(FactGemmArgs), 264u);
  EXPECT_EQ(offsetof(FactGemmArgs, swizzle), 248u);  // v8: the sm90 tile scheduler's run-time knobs
  EXPECT_EQ(offsetof(FactGemmArgs, reduction), 260u);
  EXPECT_EQ(offsetof(FactGemmArgs, vectors), 144u);
  EXPECT_EQ(offsetof(FactGemmArgs, prepared_b), 208u);
  EXPECT_EQ(offsetof(FactGemmArgs, alpha), 216u);
  EXPECT_EQ(FACT_GEMM_MAX_VECTORS, fact::realize::kMaxEpilogueVectors);
  EXPECT_EQ(sizeof(FactAttentionArgs), 248u);
  EXPECT_EQ(offsetof(FactAttentionArgs, causal), 180u);
  EXPECT_EQ(offsetof(FactAttentionArgs, mask), 184u);
  EXPECT_EQ(offsetof(FactAttentionArgs, mask_kind), 216u);
  EXPECT_EQ(offsetof(FactAttentionArgs, workspace), 224u);  // v9
  EXPECT_EQ(offsetof(FactAttentionArgs, workspace_bytes), 232u);
  EXPECT_EQ(sizeof(FactNormArgs), 112u);
  EXPECT_EQ(offsetof(FactNormArgs, eps), 96u);
  EXPECT_EQ(sizeof(FactRopeArgs), 168u);
  EXPECT_EQ(sizeof(FactRowwiseArgs), 176u);
  EXPECT_EQ(offsetof(FactRowwiseArgs, input_row_stride), 88u);
}

TEST(KernelAbiHeader, IncludeFolderIsNamedByTheHeaderSoTheBuildCacheKeyFollowsIt) {
  fs::path root = fs::temp_directory_path() / "fact_test_kernel_abi_include";
  fs::remove_all(root);
  fs::path a = write_kernel_abi_include(root, "/* a */\n");
  fs::path b = write_kernel_abi_include(root, "/* b */\n");
  EXPECT_NE(a, b);
  EXPECT_EQ(a, write_kernel_abi_include(root, "/* a */\n"));
  EXPECT_EQ(fact::read_text_file(a / "kernel_abi.h", "header"), "/* a */\n");
  fact::write_file_atomic(a / "kernel_abi.h", "damaged");  // a folder with other text is written again
  EXPECT_EQ(fact::read_text_file(write_kernel_abi_include(root, "/* a */\n") / "kernel_abi.h", "header"), "/* a */\n");

  fact::BuildJob job;
  job.source = "extern \"C\" int f() { return 0; }";
  job.command = nvcc_command(Arch::sm90, "{source}", "{output}", "/cutlass", NvccOutput::shared_library, a);
  EXPECT_NE(std::find(job.command.begin(), job.command.end(), "-I" + a.string()), job.command.end());
  std::string key_a = fact::build_cache_key(job, "nvcc 13");
  job.command = nvcc_command(Arch::sm90, "{source}", "{output}", "/cutlass", NvccOutput::shared_library, b);
  EXPECT_NE(fact::build_cache_key(job, "nvcc 13"), key_a);
  fs::remove_all(root);
}

TEST(KernelAbiHeader, CandidatesIncludeTheRenderedHeaderFromTheKernelCache) {
  fs::path cache = fs::temp_directory_path() / "fact_test_kernel_abi_cache";
  fs::remove_all(cache);
  const char* old = std::getenv("FACT_KERNEL_CACHE");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  setenv("FACT_KERNEL_CACHE", cache.c_str(), 1);
  fs::path dir = kernel_abi_include_dir();
  auto argv = nvcc_command(Arch::sm80, "k.cu", "k.so", "/cutlass");
  if (saved) setenv("FACT_KERNEL_CACHE", saved->c_str(), 1);
  else unsetenv("FACT_KERNEL_CACHE");
  EXPECT_EQ(dir.parent_path(), cache / "include");
  EXPECT_EQ(fact::read_text_file(dir / "kernel_abi.h", "header"), kernel_abi_header());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "-I" + dir.string()), argv.end());
  fs::remove_all(cache);
}
