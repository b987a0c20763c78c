// Kernel and op-wrapper generation: template rendering, generated text per family and numerics mode,
// the nvcc command line, and (tests named *Nvcc*) real nvcc compiles of three representative kernels.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/paths.h"
#include "core/process.h"
#include "realize/gemm_codegen.h"
#include "realize/gemm_config_space.h"
#include "realize/nvcc_command.h"
#include "realize/template_renderer.h"

namespace fs = std::filesystem;
using namespace fact::realize;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The top-ranked config of a given API for a packed problem.
GemmConfig top_config(GemmProblem p, KernelApi api) {
  for (const auto& r : enumerate_gemm_configs(p, {.top_n = 1000}).ranked)
    if (r.config.api == api) return r.config;
  ADD_FAILURE() << "no " << to_string(api) << " config for " << p.workload_key();
  return {};
}

GemmConfig sm90_bf16_cooperative() {
  GemmConfig c;  // defaults: sm90 cutlass3 bf16, A row, B column (K-major), D row
  c.threadblock = {128, 128, 64};
  c.warp = {64, 128, 64};
  c.instruction = {64, 128, 16};
  c.stages = 0;
  c.cluster = {2, 1, 1};
  c.kernel_schedule = KernelSchedule::KernelTmaWarpSpecializedCooperative;
  c.epilogue_schedule = EpilogueSchedule::TmaWarpSpecializedCooperative;
  c.tile_scheduler = TileScheduler::persistent;
  return c;
}

GemmConfig sm80_3xtf32() {
  GemmConfig c;
  c.arch = Arch::sm80;
  c.api = KernelApi::cutlass2_universal;
  c.numerics = Numerics::x3tf32;
  c.element_in = c.element_out = Element::f32;
  c.layout_b = MatrixLayout::row;
  c.alignment_a = c.alignment_b = c.alignment_d = 4;
  c.threadblock = {128, 128, 16};
  c.warp = {64, 64, 16};
  c.instruction = {16, 8, 8};
  c.stages = 4;
  c.tile_scheduler = TileScheduler::data_parallel;
  return c;
}

GemmConfig sm80_simt_split_k() {
  GemmConfig c;
  c.arch = Arch::sm80;
  c.api = KernelApi::cutlass2_universal;
  c.numerics = Numerics::fp32;
  c.op_class = OpClass::simt;
  c.element_in = c.element_out = Element::f32;
  c.layout_b = MatrixLayout::row;
  c.alignment_a = c.alignment_b = c.alignment_d = 1;
  c.threadblock = {128, 128, 8};
  c.warp = {32, 64, 8};
  c.instruction = {1, 1, 1};
  c.stages = 4;
  c.tile_scheduler = TileScheduler::data_parallel;
  c.split_k_mode = SplitKMode::parallel;
  c.split_k_slices = 16;
  return c;
}

// Renders and compiles one kernel to an object file; reports the wall time.
void expect_compiles(const GemmConfig& c, const std::string& name) {
  auto src = generate_gemm_kernel(c);
  fs::path dir = fs::temp_directory_path() / "fact_test_nvcc";
  fs::create_directories(dir);
  fs::path cu = dir / (name + ".cu"), obj = dir / (name + ".o");
  std::ofstream(cu) << src.text;
  auto argv = nvcc_command(c, cu, obj, fact::cutlass_dir(), NvccOutput::object);
  auto t0 = std::chrono::steady_clock::now();
  fact::ProcessOptions o;
  o.timeout = std::chrono::seconds(1100);
  auto r = fact::run_process(argv, o);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[nvcc] %s (%s, %s): %.1f s, exit %d\n", name.c_str(), c.summary().c_str(),
              nvcc_gencode(c.arch).c_str(), s, r.exit_code);
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 6000);
  EXPECT_FALSE(contains(r.err, "error")) << r.err.substr(0, 6000);
  EXPECT_TRUE(fs::exists(obj));
}

}  // namespace

TEST(TemplateRenderer, FillsSlots) {
  EXPECT_EQ(render_template("a {{x}} b {{y}}{{x}}", {{"x", "1"}, {"y", "2"}}, "t"), "a 1 b 21");
  EXPECT_EQ(template_slots("{{b}} {{a}} {{b}}", "t"), (std::vector<std::string>{"b", "a"}));
}

TEST(TemplateRenderer, MissingValueIsAnErrorNamingSlotAndLine) {
  try {
    render_template("line1\nvalue {{missing}}", {}, "t.in");
    FAIL() << "expected an error";
  } catch (const fact::Error& e) {
    EXPECT_TRUE(contains(e.what(), "t.in:2")) << e.what();
    EXPECT_TRUE(contains(e.what(), "missing")) << e.what();
  }
}

TEST(TemplateRenderer, UnusedValueAndMalformedSlotAreErrors) {
  EXPECT_THROW(render_template("{{a}}", {{"a", "1"}, {"typo", "2"}}, "t"), fact::Error);
  EXPECT_THROW(render_template("x {{a", {{"a", "1"}}, "t"), fact::Error);
  EXPECT_THROW(render_template("{{a, b}}", {}, "t"), fact::Error);  // C++ brace-init must not be doubled
}

TEST(GemmCodegen, EveryFamilyAndNumericsRendersItsCutlassTypes) {
  struct Case {
    Arch arch;
    Numerics numerics;
    KernelApi api;
    std::vector<std::string> expected;
  };
  std::vector<Case> cases = {
      {Arch::sm90, Numerics::bf16, KernelApi::cutlass3_collective,
       {"cutlass::gemm::collective::CollectiveBuilder", "cutlass::bfloat16_t", "cutlass::arch::Sm90",
        "cutlass::gemm::KernelTmaWarpSpecialized", "StageCountAutoCarveout", "GemmUniversalAdapter"}},
      {Arch::sm90, Numerics::fp16, KernelApi::cutlass3_collective, {"cutlass::half_t", "CollectiveBuilder"}},
      {Arch::sm90, Numerics::tf32, KernelApi::cutlass3_collective,
       {"using ElementA = float;", "CollectiveBuilder", "cutlass::layout::ColumnMajor"}},
      {Arch::sm90, Numerics::fp32, KernelApi::cutlass2_universal, {"OpClassSimt", "GemmShape<1, 1, 1>"}},
      {Arch::sm90, Numerics::x3tf32, KernelApi::cutlass2_universal, {"OpMultiplyAddFastF32", "OpClassTensorOp"}},
      {Arch::sm80, Numerics::tf32, KernelApi::cutlass2_universal,
       {"cutlass::arch::OpMultiplyAdd;", "GemmShape<16, 8, 8>", "device::GemmUniversal"}},
      {Arch::sm80, Numerics::x3tf32, KernelApi::cutlass2_universal, {"OpMultiplyAddFastF32"}},
      {Arch::sm80, Numerics::bf16, KernelApi::cutlass2_universal, {"cutlass::bfloat16_t", "GemmShape<16, 8, 16>"}},
      {Arch::sm80, Numerics::fp16, KernelApi::cutlass2_universal, {"cutlass::half_t"}},
      {Arch::sm80, Numerics::fp32, KernelApi::cutlass2_universal, {"OpClassSimt", "using ElementD = float;"}},
  };
  for (const auto& k : cases) {
    auto p = GemmProblem::packed(1024, 1024, 1024, 1, k.numerics, k.arch, /*b_column=*/true);
    GemmConfig c = top_config(p, k.api);
    auto src = generate_gemm_kernel(c);
    SCOPED_TRACE(c.summary());
    for (const auto& e : k.expected) EXPECT_TRUE(contains(src.text, e)) << "missing " << e;
    for (const char* sym : {"_can_implement(", "_workspace_bytes(", "_run(", "_describe(void)"})
      EXPECT_TRUE(contains(src.text, "fact_" + c.id() + sym)) << sym;
    EXPECT_TRUE(contains(src.text, c.to_json().dump()));
    EXPECT_FALSE(contains(src.text, "{{"));
  }
}

TEST(GemmCodegen, EpiloguesAndSchedulersPickTheirCutlassPieces) {
  auto c = sm90_bf16_cooperative();
  c.epilogue = Epilogue::bias_gelu_tanh;
  c.tile_scheduler = TileScheduler::stream_k;
  auto t = generate_gemm_kernel(c).text;
  EXPECT_TRUE(contains(t, "LinCombPerColBiasEltAct<cutlass::epilogue::thread::GELU_taylor"));
  EXPECT_TRUE(contains(t, "cutlass::gemm::StreamKScheduler"));

  auto s = sm80_simt_split_k();
  s.split_k_mode = SplitKMode::serial;
  s.epilogue = Epilogue::bias_relu;
  t = generate_gemm_kernel(s).text;
  EXPECT_TRUE(contains(t, "LinearCombinationRelu"));
  EXPECT_TRUE(contains(t, "SplitK::kSerial"));

  auto k = sm80_3xtf32();
  k.tile_scheduler = TileScheduler::stream_k;
  EXPECT_TRUE(contains(generate_gemm_kernel(k).text, "ThreadblockSwizzleStreamK"));
}

TEST(GemmCodegen, RejectsConfigsCutlassCannotTake) {
  auto c = sm90_bf16_cooperative();
  c.numerics = Numerics::tf32;
  c.element_in = c.element_out = Element::f32;
  c.alignment_a = c.alignment_b = c.alignment_d = 4;
  c.threadblock.k = 32;
  c.layout_b = MatrixLayout::row;  // N-major B: wgmma tf32 needs K-major
  try {
    generate_gemm_kernel(c);
    FAIL() << "expected an error";
  } catch (const fact::Error& e) {
    EXPECT_TRUE(contains(e.what(), "K-major")) << e.what();
  }
  auto r = sm80_3xtf32();
  r.epilogue = Epilogue::bias_residual;
  EXPECT_THROW(generate_gemm_kernel(r), fact::Error);
}

TEST(GemmCodegen, OpWrapperDefinesCudaAndMetaOps) {
  auto a = sm90_bf16_cooperative();
  auto b = sm80_3xtf32();
  b.epilogue = Epilogue::bias;
  auto w = generate_gemm_op_wrapper({a, b}).text;
  for (const auto& c : {a, b}) {
    EXPECT_TRUE(contains(w, "m.def(\"gemm_" + c.id() + "(Tensor a, Tensor b, Tensor? bias, Tensor? residual) -> Tensor\")"));
    EXPECT_TRUE(contains(w, "m.impl(\"gemm_" + c.id() + "\", &fact_ops::gemm_" + c.id() + "_cuda)"));
    EXPECT_TRUE(contains(w, "m.impl(\"gemm_" + c.id() + "\", &fact_ops::gemm_" + c.id() + "_meta)"));
    EXPECT_TRUE(contains(w, "fact_" + c.id() + "_run(&args)"));
  }
  EXPECT_TRUE(contains(w, "TORCH_LIBRARY_FRAGMENT(fact, m)"));
  EXPECT_TRUE(contains(w, "TORCH_LIBRARY_IMPL(fact, Meta, m)"));
  EXPECT_TRUE(contains(w, "at::cuda::getCurrentCUDAStream()"));
  EXPECT_TRUE(contains(w, "at::kBFloat16"));
  EXPECT_TRUE(contains(w, "at::kFloat"));
  EXPECT_FALSE(contains(w, "{{"));
  EXPECT_THROW(generate_gemm_op_wrapper({}), fact::Error);
}

TEST(GemmCodegen, NvccCommandNamesArchIncludesAndOutput) {
  auto cmd = nvcc_command(sm90_bf16_cooperative(), "k.cu", "k.so", "/cutlass");
  auto has = [&](const std::string& a) { return std::find(cmd.begin(), cmd.end(), a) != cmd.end(); };
  EXPECT_TRUE(has("-gencode=arch=compute_90a,code=sm_90a"));
  EXPECT_TRUE(has("-std=c++17"));
  EXPECT_TRUE(has("-O3"));
  EXPECT_TRUE(has("--expt-relaxed-constexpr"));
  EXPECT_TRUE(has("-I/cutlass/include"));
  EXPECT_TRUE(has("-I/cutlass/tools/util/include"));
  EXPECT_TRUE(has("-shared"));
  EXPECT_EQ(cmd.back(), "k.so");
  auto obj = nvcc_command(sm80_3xtf32(), "k.cu", "k.o", "/cutlass", NvccOutput::object);
  EXPECT_NE(std::find(obj.begin(), obj.end(), "-gencode=arch=compute_80,code=sm_80"), obj.end());
  EXPECT_NE(std::find(obj.begin(), obj.end(), "-c"), obj.end());
}

TEST(GemmCodegenNvcc, Sm90Bf16CooperativeTmaCompiles) { expect_compiles(sm90_bf16_cooperative(), "sm90_bf16_coop"); }
TEST(GemmCodegenNvcc, Sm80ThreeTf32Compiles) { expect_compiles(sm80_3xtf32(), "sm80_3xtf32"); }
TEST(GemmCodegenNvcc, Sm80SimtFp32ParallelSplitKCompiles) { expect_compiles(sm80_simt_split_k(), "sm80_simt_splitk"); }

// The wrapper is built on the GPU machine; here it is only parsed against the venv's torch headers.
TEST(GemmCodegen, OpWrapperParsesAgainstTorchHeaders) {
  auto where = fact::run_process({fact::python_exe(), "-c",
                                  "import importlib.util, os; s = importlib.util.find_spec('torch'); "
                                  "print(os.path.dirname(s.origin) if s else '')"});
  std::string torch_dir = where.out.substr(0, where.out.find('\n'));
  if (where.exit_code != 0 || torch_dir.empty() || !fs::exists(fs::path(torch_dir) / "include"))
    GTEST_SKIP() << "no torch headers in " << fact::python_exe();
  auto c = sm80_3xtf32();
  c.epilogue = Epilogue::bias;
  fs::path dir = fs::temp_directory_path() / "fact_test_wrapper";
  fs::create_directories(dir);
  std::ofstream(dir / "ops.cpp") << generate_gemm_op_wrapper({sm90_bf16_cooperative(), c}).text;
  fs::path inc = fs::path(torch_dir) / "include";
  auto r = fact::run_process({"g++", "-std=c++17", "-fsyntax-only", "-I" + inc.string(),
                              "-I" + (inc / "torch" / "csrc" / "api" / "include").string(), "-I/usr/local/cuda/include",
                              "-I" + (fact::fact_home() / "src" / "realize").string(), (dir / "ops.cpp").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 4000);
}
