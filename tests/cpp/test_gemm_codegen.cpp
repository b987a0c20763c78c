// Kernel and op-wrapper generation: template rendering, generated text per family and numerics mode,
// the nvcc command line, and (tests named *Nvcc*) real nvcc compiles of seven representative kernels.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "gemm_test_configs.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/paths.h"
#include "core/process.h"
#include "kernel_abi.h"  // rendered by `fact ops abi-header` (tests/cpp/CMakeLists.txt)
#include "realize/families/gemm/gemm_codegen.h"
#include "realize/families/gemm/gemm_config_space.h"
#include "realize/kernel_abi_header.h"
#include "realize/nvcc_command.h"
#include "realize/template_renderer.h"
#include "torch_headers_check.h"

namespace fs = std::filesystem;
using namespace fact;
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

// The best-ranked config with this mainloop transform (any rank).
GemmConfig top_config_with(GemmProblem p, MainloopTransform t) {
  for (const auto& r : enumerate_gemm_configs(p, {.top_n = 100000}).ranked)
    if (r.config.mainloop_transform == t) return r.config;
  ADD_FAILURE() << "no " << to_string(t) << " config for " << p.workload_key();
  return {};
}

using test::sm80_3xtf32;
using test::sm90_bf16_cooperative;

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

// 3xTF32 on sm90 through the split pre-pass, A and B row-major (B is transposed by the pre-pass).
GemmConfig sm90_3xtf32_split() {
  GemmConfig c = sm90_bf16_cooperative();
  c.numerics = Numerics::x3tf32;
  c.element_in = c.element_out = Element::f32;
  c.layout_b = MatrixLayout::row;
  c.alignment_a = c.alignment_b = c.alignment_d = 4;
  c.threadblock = {128, 128, 32};
  c.warp = {64, 128, 32};
  c.instruction = {64, 128, 8};
  c.mainloop_transform = MainloopTransform::split3_tf32;
  return c;
}

// Renders and compiles one kernel to an object file (or a shared library); reports the wall time.
fs::path expect_compiles(const GemmConfig& c, const std::string& name, NvccOutput kind = NvccOutput::object) {
  auto src = generate_gemm_kernel(c);
  fs::path dir = fs::temp_directory_path() / "fact_test_nvcc";
  fs::create_directories(dir);
  fs::path cu = dir / (name + ".cu"), obj = dir / (name + (kind == NvccOutput::object ? ".o" : ".so"));
  std::ofstream(cu) << src.text;
  auto argv = nvcc_command(c, cu, obj, fact::cutlass_dir(), kind);
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
  return obj;
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
      EXPECT_TRUE(contains(src.text, "fact_" + c.kernel_id() + sym)) << sym;
    EXPECT_TRUE(contains(src.text, c.kernel_config().to_json().dump()));
    EXPECT_FALSE(contains(src.text, "{{"));
  }
}

TEST(GemmCodegen, EpiloguesAndSchedulersPickTheirCutlassPieces) {
  auto c = sm90_bf16_cooperative();
  c.epilogue = Epilogue::named("bias_gelu_tanh");
  c.tile_scheduler = TileScheduler::stream_k;
  auto t = generate_gemm_kernel(c).text;
  EXPECT_TRUE(contains(t, "fusion::Sm90Compute<cutlass::epilogue::thread::GELU_taylor, ElementD, ElementCompute, kRound>"));
  EXPECT_TRUE(contains(t, "cutlass::gemm::StreamKScheduler"));

  auto s = sm80_simt_split_k();
  s.split_k_mode = SplitKMode::serial;
  s.epilogue = Epilogue::named("bias_relu");
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
  c.alignment_a = c.alignment_d = 4;
  c.alignment_b = 2;               // 8-byte rows: TMA cannot read them, and no pre-pass copies them
  c.threadblock.k = 32;
  c.layout_b = MatrixLayout::row;
  try {
    generate_gemm_kernel(c);
    FAIL() << "expected an error";
  } catch (const fact::Error& e) {
    EXPECT_TRUE(contains(e.what(), "16-byte aligned")) << e.what();
  }
  // The 2.x broadcast epilogue (residual-slot tensors) applies its activation per partial sum: no split-K.
  auto r = sm80_3xtf32(Epilogue::named("bias_silu_mul"));
  r.split_k_mode = SplitKMode::serial;
  r.split_k_slices = 2;
  try {
    generate_gemm_kernel(r);
    FAIL() << "expected an error";
  } catch (const fact::Error& e) {
    EXPECT_TRUE(contains(e.what(), "data-parallel only")) << e.what();
  }
}

// Item of issue 4: every fused epilogue generates for sm80 and sm90 in every numerics mode, each with the
// pieces that compute it (3.x fusion / visitor tree; 2.x output operator or broadcast epilogue): CUTLASS's
// activations in tf32/bf16/fp16, FACT's accurate ones (fp32_activation.hpp.in) in fp32/3xtf32.
TEST(GemmCodegen, EveryEpilogueRendersOnBothArchsInEveryNumericsMode) {
  struct Pieces {
    Epilogue epilogue;
    std::vector<std::string> sm90, sm80;
    std::vector<std::string> sm90_fp32 = {}, sm80_fp32 = {};  // fp32-accurate modes, where they differ
  };
  const std::string act = "fusion::Sm90Compute<";
  const std::string root = ", ElementD, ElementCompute, kRound>";    // the tree's root writes D
  const std::string inner = ", ElementCompute, ElementCompute, kRound>";
  const std::string bias = "fusion::Sm90RowBroadcast<0, TileShape, ElementBias, ElementCompute, RowStride, kAlignmentBias>";
  const std::string fma = act + "cutlass::homogeneous_multiply_add" + inner;  // alpha * acc + bias
  const std::vector<Pieces> epilogues = {
      {Epilogue::named("bias_relu"), {act + "cutlass::epilogue::thread::ReLu" + root, fma, bias}, {"LinearCombinationRelu<"}},
      {Epilogue::named("bias_silu"), {act + "cutlass::epilogue::thread::SiLu" + root, fma, bias}, {"LinearCombinationSilu<"},
       {act + "fact_act::Silu" + root}, {"LinearCombinationWith<fact_act::Silu>::Op<"}},
      {Epilogue::named("bias_gelu_erf"), {act + "cutlass::epilogue::thread::GELU" + root}, {"LinearCombinationGELU<"},
       {act + "fact_act::GeluErf" + root}, {"LinearCombinationWith<fact_act::GeluErf>::Op<"}},
      {Epilogue::named("bias_gelu_tanh"), {act + "cutlass::epilogue::thread::GELU_taylor" + root},
       {"using EpilogueOutputOp = LinearCombinationWith<cutlass::epilogue::thread::GELU_taylor>::Op<"},
       {act + "fact_act::GeluTanh" + root},
       {"using EpilogueOutputOp = LinearCombinationWith<fact_act::GeluTanh>::Op<"}},
      {Epilogue::named("bias_residual"),
       {act + "cutlass::plus" + root, fma, bias, "fusion::Sm90SrcFetch<ElementC>", "constexpr bool kHasResidual = true;"},
       {"LinearCombinationResidualBlock<", "cutlass::epilogue::thread::Identity, cutlass::plus,"}},
      {Epilogue::named("bias_silu_mul"),
       {act + "cutlass::multiplies" + root, act + "cutlass::epilogue::thread::SiLu" + inner, fma, bias,
        "fusion::Sm90SrcFetch<ElementC>", "constexpr bool kHasResidual = true;"},
       {"LinearCombinationResidualBlock<", "cutlass::epilogue::thread::SiLu, cutlass::multiplies,",
        "GemmWithFusedEpilogue<"},
       {act + "fact_act::Silu" + inner, "fusion::Sm90SrcFetch<ElementC>"},
       {"LinearCombinationResidualBlock<", "fact_act::Silu, cutlass::multiplies,", "GemmWithFusedEpilogue<"}},
  };
  int rendered = 0;
  for (Arch arch : {Arch::sm80, Arch::sm90})
    for (Numerics n : {Numerics::fp32, Numerics::x3tf32, Numerics::tf32, Numerics::bf16, Numerics::fp16})
      for (const auto& e : epilogues) {
        auto p = GemmProblem::packed(4096, 1024, 1024, 1, n, arch, /*b_column=*/true, e.epilogue);
        p.b.constant = true;  // a weight: 3xTF32 ranks its pre-pass split first (split3_rmem is the next test's)
        std::vector<KernelApi> apis = {KernelApi::cutlass2_universal};
        if (arch == Arch::sm90 && n != Numerics::fp32) apis.push_back(KernelApi::cutlass3_collective);
        bool accurate = n == Numerics::fp32 || n == Numerics::x3tf32;
        for (KernelApi api : apis) {
          GemmConfig c = top_config(p, api);
          SCOPED_TRACE(to_string(e.epilogue) + " " + c.summary());
          auto src = generate_gemm_kernel(c);
          bool sm90 = api == KernelApi::cutlass3_collective;
          const auto& fp32_pieces = sm90 ? e.sm90_fp32 : e.sm80_fp32;
          const auto& pieces = accurate && !fp32_pieces.empty() ? fp32_pieces : sm90 ? e.sm90 : e.sm80;
          for (const auto& piece : pieces)
            EXPECT_TRUE(contains(src.text, piece)) << "missing " << piece << " in " << src.template_name;
          // FACT's functors are in the kernel exactly when it uses them.
          EXPECT_EQ(contains(src.text, "namespace fact_act {"), accurate && !fp32_pieces.empty());
          EXPECT_FALSE(contains(src.text, "{{"));
          EXPECT_TRUE(contains(src.text, "fact_" + c.kernel_id() + "_run("));
          ++rendered;
        }
      }
  EXPECT_EQ(rendered, 2 * 5 * 6 + 4 * 6);
}

// The fix for MiniGPT's MLP GEMM (65536x768 -> 3072, bias, tanh-GELU), whose 3xtf32 kernel missed fp32
// accuracy through CUTLASS's tanh.approx.f32: every candidate of the fp32-accurate modes, on both archs and
// both APIs, computes the activation with FACT's accurate functor and never names CUTLASS's GELU_taylor;
// tf32 and bf16 candidates keep GELU_taylor and carry none of FACT's.
TEST(GemmCodegen, FpAccurateModesComputeGeluTanhWithFactsFunctorFastModesKeepCutlass) {
  for (Arch arch : {Arch::sm80, Arch::sm90})
    for (Numerics n : {Numerics::x3tf32, Numerics::fp32, Numerics::tf32, Numerics::bf16}) {
      auto p = GemmProblem::packed(65536, 3072, 768, 1, n, arch, /*b_column=*/true, Epilogue::named("bias_gelu_tanh"));
      bool accurate = n == Numerics::fp32 || n == Numerics::x3tf32;
      auto space = enumerate_gemm_configs(p, {.top_n = 24});
      ASSERT_FALSE(space.ranked.empty());
      std::set<std::string> templates;
      for (const auto& rc : space.ranked) {
        auto src = generate_gemm_kernel(rc.config);
        SCOPED_TRACE(rc.config.summary());
        templates.insert(src.template_name);
        EXPECT_EQ(contains(src.text, "cutlass::epilogue::thread::GELU_taylor"), !accurate);
        EXPECT_EQ(contains(src.text, "fact_act::GeluTanh"), accurate);
        EXPECT_EQ(contains(src.text, "return times_sigmoid(x, x * fmaf(kTwoBetaKappa, x * x, kTwoBeta));"), accurate);
      }
      if (arch == Arch::sm90 && n == Numerics::x3tf32)  // the kernel that ran 3.3 ms on the H100
        EXPECT_TRUE(templates.count("cutlass/gemm_sm90_tf32_prepass.cu.in"));
    }
}

// fp32-accurate kernels need IEEE expf/erfcf and divisions: no fast-math flag on the command line (nvcc 13
// defines no macro under --use_fast_math, so the kernel source cannot refuse it itself).
TEST(GemmCodegen, NvccCommandKeepsIeeeMath) {
  for (const auto& c : {sm80_3xtf32(Epilogue::named("bias_gelu_tanh")), sm90_bf16_cooperative()})
    for (const auto& arg : nvcc_command(c, "k.cu", "k.so", "/cutlass")) {
      EXPECT_FALSE(contains(arg, "fast_math") || contains(arg, "fast-math")) << arg;
      EXPECT_FALSE(contains(arg, "prec-div=false") || contains(arg, "prec-sqrt=false") || contains(arg, "ftz=true"))
          << arg;
    }
}

TEST(GemmCodegen, SiluMulArgumentsFollowTheVisitorTree) {
  auto c = sm90_bf16_cooperative();
  c.epilogue = Epilogue::named("bias_silu_mul");
  auto t = generate_gemm_kernel(c).text;
  // U is the source C with beta unused; the nested arguments follow the tree: silu's fma gets alpha, acc, bias.
  EXPECT_TRUE(contains(t, "{ {ElementCompute(a.alpha)}, {nullptr}, {ScalarStride{}} }  /* alpha */"));
  EXPECT_TRUE(contains(t, "{ static_cast<const ElementBias*>(a.bias), ElementBias(0), RowStride{} }"));
  EXPECT_TRUE(contains(t, "{}  /* residual */"));
  EXPECT_FALSE(contains(t, "ElementCompute(beta)"));
  EXPECT_TRUE(contains(t, "const void* c = kHasResidual ? a.residual"));
  EXPECT_TRUE(contains(t, "if (kHasResidual && (!a.residual || a.c)) return FACT_ERR_SHAPE;"));
  // The plain GEMM is CUTLASS's LinearCombination as a tree: beta * C + alpha * acc, beta read at run time.
  auto plain = generate_gemm_kernel(sm90_bf16_cooperative()).text;
  EXPECT_TRUE(contains(plain, "fusion::Sm90Compute<cutlass::homogeneous_multiply_add, ElementD, ElementCompute, kRound>"));
  EXPECT_TRUE(contains(plain, "fusion::Sm90Compute<cutlass::multiplies, ElementCompute, ElementCompute, kRound>"));
  EXPECT_TRUE(contains(plain, "{ {ElementCompute(beta)}, {nullptr}, {ScalarStride{}} }  /* beta */"));
  EXPECT_FALSE(contains(plain, "Sm90RowBroadcast"));
}

TEST(GemmCodegen, Sm90ThreeTf32RendersSplitPrepassAndTf32GemmWithThreeK) {
  auto p = GemmProblem::packed(4096, 4096, 4096, 1, Numerics::x3tf32, Arch::sm90, /*b_column=*/false);
  GemmConfig c = top_config_with(p, MainloopTransform::split3_tf32);
  ASSERT_EQ(c.mainloop_transform, MainloopTransform::split3_tf32);
  auto src = generate_gemm_kernel(c);
  EXPECT_EQ(src.template_name, "cutlass/gemm_sm90_tf32_prepass.cu.in");
  for (const char* part : {
           // the pre-pass: TF32 rounding, the big/small split, both operand kernels with 16-byte accesses
           "cvt.rna.tf32.f32", "tf32_small(x.x, big.x)", "__global__ void __launch_bounds__(256) prepare_k_contiguous",
           "__global__ void __launch_bounds__(256) prepare_outer_contiguous", "__shared__ float tile",
           "reinterpret_cast<const float4*>", "reinterpret_cast<float4*>",
           // A' = [A_small | A_big | A_big], B' = [B_big ; B_small ; B_big], caller's B row-major
           "constexpr bool kSplit3 = true;", "kSegments = kSplit3 ? 3 : 1", "kSmallSegmentA = kSplit3 ? 0 : -1",
           "kSmallSegmentB = kSplit3 ? 1 : -1", "using OperandLayoutA = cutlass::layout::RowMajor;",
           "using OperandLayoutB = cutlass::layout::RowMajor;",
           // one CUTLASS 3.x TF32 GEMM, K-major operands, K' = segments * Kp
           "using LayoutA = cutlass::layout::RowMajor;", "using LayoutB = cutlass::layout::ColumnMajor;",
           "using ElementA = float;", "cutlass::gemm::collective::CollectiveBuilder", "cutlass::arch::Sm90",
           "cute::_32>", "g.k = kCopyA || kCopyB ? ld : a.k;", "int64_t kp = padded_k(a), ld = kSegments * kp;",
           "cute::make_shape(int(a.m), int(a.n), int(g.k), int(a.batch))",
           // workspace: [A' | B' | CUTLASS's], per-batch slices unless the operand is shared
           "copy_a_bytes(a) + copy_b_bytes(a) + Gemm::get_workspace_size",
           "batches_of(a, a.batch_stride_a)) * a.m * kSegments * padded_k(a) * sizeof(float)",
           "g.batch_stride_a = a.batch_stride_a == 0 ? 0 : a.m * ld;"})
    EXPECT_TRUE(contains(src.text, part)) << "missing " << part;
  EXPECT_TRUE(contains(src.text, "\"mainloop_transform\":\"split3_tf32\""));
  for (const char* sym : {"_can_implement(", "_workspace_bytes(", "_prepared_b_bytes(", "_prepare_b(", "_run(",
                          "_describe(void)"})
    EXPECT_TRUE(contains(src.text, "fact_" + c.kernel_id() + sym)) << sym;
  EXPECT_FALSE(contains(src.text, "{{"));
  EXPECT_FALSE(contains(src.text, "gemm/device/gemm_universal.h\"")) << "no 2.x mma.sync kernel";

  // tf32 with row-major B: the same pre-pass as a K-major copy, one segment, no split.
  auto t = top_config(GemmProblem::packed(4096, 4096, 4096, 1, Numerics::tf32, Arch::sm90, false),
                      KernelApi::cutlass3_collective);
  t.mainloop_transform = MainloopTransform::kmajor_tf32;
  auto tsrc = generate_gemm_kernel(t).text;
  EXPECT_TRUE(contains(tsrc, "constexpr bool kSplit3 = false;"));
  EXPECT_TRUE(contains(tsrc, "prepare_outer_contiguous"));
  // tf32 with column-major B needs no pre-pass: the plain 3.x template.
  auto plain = top_config(GemmProblem::packed(4096, 4096, 4096, 1, Numerics::tf32, Arch::sm90, true),
                          KernelApi::cutlass3_collective);
  EXPECT_EQ(generate_gemm_kernel(plain).template_name, "cutlass/gemm_sm90_collective.cu.in");
}

TEST(GemmCodegen, OpWrapperDefinesCudaAndMetaOps) {
  auto a = sm90_bf16_cooperative();
  auto b = sm80_3xtf32();
  b.epilogue = Epilogue::named("bias");
  auto w = generate_gemm_op_wrapper({a, b}).text;
  for (const auto& c : {a, b}) {
    EXPECT_TRUE(contains(w, "\"gemm_" + c.id() +
                                "(Tensor a, Tensor b, Tensor? bias, Tensor? residual, *, bool b_constant=False) -> Tensor\");"));
    // A weight's pre-pass copy is kept by the op only when the caller marks b constant.
    EXPECT_TRUE(contains(w, "if (b_constant) {  // a module weight"));
    EXPECT_TRUE(contains(w, "fact_" + c.kernel_id() + "_prepare_b(&args, out)"));
    EXPECT_TRUE(contains(w, "m.impl(\"gemm_" + c.id() + "\", &fact_ops::gemm_" + c.id() + "_cuda)"));
    EXPECT_TRUE(contains(w, "m.impl(\"gemm_" + c.id() + "\", &fact_ops::gemm_" + c.id() + "_meta)"));
    EXPECT_TRUE(contains(w, "fact_" + c.kernel_id() + "_run(&args)"));
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
// tf32 operands that are not K-major, without a pre-pass: column-major A goes through CUTLASS's register-sourced
// mainloop as it is (cooperative), row-major A and B through the transposed problem D^T = B^T A^T (ping-pong).
TEST(GemmCodegenNvcc, Sm90Tf32RegisterSourcedMainloopsCompile) {
  auto col_a = GemmProblem::packed(4096, 4096, 4096, 1, Numerics::tf32, Arch::sm90, /*b_column=*/true);
  col_a.a.layout = MatrixLayout::column;
  auto row_row = GemmProblem::packed(4096, 4096, 4096, 1, Numerics::tf32, Arch::sm90, /*b_column=*/false);
  struct Case {
    GemmProblem p;
    MainloopTransform transform;
    KernelSchedule schedule;
  };
  for (const auto& k : {Case{col_a, MainloopTransform::none, KernelSchedule::KernelTmaWarpSpecializedCooperative},
                        Case{row_row, MainloopTransform::transposed, KernelSchedule::KernelTmaWarpSpecializedPingpong}}) {
    std::optional<GemmConfig> found;
    for (const auto& r : enumerate_gemm_configs(k.p, {.top_n = 100000}).ranked)
      if (r.config.kernel_schedule == k.schedule && r.config.mainloop_transform == k.transform &&
          r.config.cluster.m * r.config.cluster.n == 1 && r.config.tile_scheduler == TileScheduler::persistent) {
        found = r.config;
        break;
      }
    ASSERT_TRUE(found) << to_string(k.transform);
    auto src = generate_gemm_kernel(*found);
    EXPECT_EQ(src.template_name, "cutlass/gemm_sm90_collective.cu.in");
    EXPECT_TRUE(contains(src.text, std::string("constexpr bool kTransposed = ") +
                                       (k.transform == MainloopTransform::transposed ? "true;" : "false;")));
    expect_compiles(*found, "sm90_tf32_rs_" + to_string(k.transform));
  }
}

// A stream-K kernel serves split-K and both reduction orders at run time: its library checks splits and reduction
// from FactGemmArgs. Its scheduler divides work by the SM count, so without a GPU it answers FACT_ERR_UNSUPPORTED
// (never a crash) where a GPU machine answers FACT_OK.
TEST(GemmCodegenNvcc, Sm90StreamKTakesSplitsAndReductionAtRunTime) {
  GemmConfig c = sm90_bf16_cooperative();
  c.cluster = {1, 1, 1};
  c.tile_scheduler = TileScheduler::stream_k;
  fs::path so = expect_compiles(c, "sm90_bf16_stream_k", NvccOutput::shared_library);
  void* lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  std::string prefix = "fact_" + c.kernel_id();
  auto can_implement = reinterpret_cast<int (*)(const FactGemmArgs*)>(dlsym(lib, (prefix + "_can_implement").c_str()));
  auto workspace_bytes = reinterpret_cast<size_t (*)(const FactGemmArgs*)>(dlsym(lib, (prefix + "_workspace_bytes").c_str()));
  ASSERT_TRUE(can_implement && workspace_bytes);
  auto fake = [](uintptr_t at) { return reinterpret_cast<void*>(at); };
  FactGemmArgs a{};
  a.m = a.n = 256, a.k = 65536, a.batch = 1;
  a.a = fake(1 << 20), a.lda = a.k;
  a.b = fake(1 << 21), a.ldb = a.k;  // column-major B
  a.d = fake(1 << 22), a.ldd = a.n;
  a.alpha = 1.0f;
  a.splits = 8, a.reduction = 1;
  int rc = can_implement(&a);
  EXPECT_TRUE(rc == FACT_OK || rc == FACT_ERR_UNSUPPORTED) << rc;
  (void)workspace_bytes(&a);  // answers without a GPU too
  a.reduction = 2;
  EXPECT_EQ(can_implement(&a), FACT_ERR_SHAPE) << "reduction is 0 (deterministic) or 1 (any order)";
  a.reduction = 0, a.swizzle = 3;
  EXPECT_EQ(can_implement(&a), FACT_ERR_SHAPE) << "swizzles are 1, 2, 4 or 8";
  dlclose(lib);
}
// MiniGPT's MLP GEMM in 3xtf32 on the H100: the split pre-pass kernel with FACT's accurate tanh-GELU in
// the 3.x visitor tree (Sm90Compute over fragments).
TEST(GemmCodegenNvcc, Sm90ThreeTf32BiasGeluTanhCompiles) {
  GemmConfig c = sm90_3xtf32_split();
  c.epilogue = Epilogue::named("bias_gelu_tanh");
  expect_compiles(c, "sm90_3xtf32_gelu_tanh");
}
// GPT-2's logits (N = 50257): the 3xTF32 split kernel with D stored from registers (no TMA), as the ranking's first.
TEST(GemmCodegenNvcc, Sm90ThreeTf32UnalignedDStoresFromRegistersCompiles) {
  auto p = GemmProblem::packed(4096, 50257, 768, 1, Numerics::x3tf32, Arch::sm90, /*b_column=*/true);
  GemmConfig c = enumerate_gemm_configs(p, {.top_n = 1}).ranked.front().config;
  ASSERT_EQ(c.epilogue_schedule, EpilogueSchedule::NoSmemWarpSpecialized) << c.summary();
  expect_compiles(c, "sm90_3xtf32_nosmem_logits");
}
// split3_rmem computes D^T: the caller's bias [N] is a column vector of its D, a caller's [batch, M] vector a row
// vector with the batch stride M; D and C are column-major views of the caller's row-major D and C.
TEST(GemmCodegen, RegisterSplitRendersTheTransposedEpilogue) {
  auto tree = Epilogue::from_json(nlohmann::json::parse(
      R"(["add", ["mul", ["add", ["mul", "alpha", "acc"], {"row": "bias"}], {"col": "vec0"}], "residual"])"));
  auto p = GemmProblem::packed(128, 4096, 4096, 1, Numerics::x3tf32, Arch::sm90, /*b_column=*/true, tree);
  GemmConfig c = top_config(p, KernelApi::cutlass3_collective);
  ASSERT_EQ(c.mainloop_transform, MainloopTransform::split3_rmem) << c.summary();
  auto src = generate_gemm_kernel(c);
  EXPECT_EQ(src.template_name, "cutlass/gemm_sm90_split3_rmem.cu.in");
  for (std::string piece : {"using LayoutD = cutlass::layout::ColumnMajor;", "struct RmemSplitMainloop",
                            "fusion::Sm90ColBroadcast<0, TileShape, ElementBias, ElementCompute, ColStride, kAlignmentBias>",
                            "fusion::Sm90RowBroadcast<0, TileShape, ElementBias, ElementCompute, RowStride, kAlignmentBias>",
                            "static_cast<const ElementBias*>(a.bias), ElementBias(0), ColStride{} }",
                            "static_cast<const ElementBias*>(a.vectors[0]), ElementBias(0), RowStride{cute::_0{}, cute::_1{}, a.m} }",
                            "prepare_operand<2, 1, kSplitAlignment, kSplitKContiguous, 8>",
                            "constexpr bool kTransposed = true;",
                            "if (!aligned(a.vectors[0], kAlignmentBias, sizeof(ElementBias))) return FACT_ERR_SHAPE;"})
    EXPECT_TRUE(contains(src.text, piece)) << "missing " << piece;
  EXPECT_FALSE(contains(src.text, "{{"));
}

// The register split on the problem as it is: A read in place, B (row-major here) split by the pre-pass's transpose
// path and kept for a weight (prepared_b); D and bias as the caller's.
TEST(GemmCodegenNvcc, Sm90ThreeTf32RegisterSplitOfACompiles) {
  auto p = GemmProblem::packed(4096, 4096, 4096, 1, Numerics::x3tf32, Arch::sm90, /*b_column=*/false, Epilogue::named("bias"));
  GemmConfig c = top_config_with(p, MainloopTransform::split3_rmem_a);
  ASSERT_EQ(c.mainloop_transform, MainloopTransform::split3_rmem_a) << c.summary();
  auto src = generate_gemm_kernel(c);
  for (std::string piece : {"constexpr bool kTransposed = false;", "using LayoutD = cutlass::layout::RowMajor;",
                            "constexpr bool kSplitKContiguous = cute::is_same_v<cutlass::layout::RowMajor, cutlass::layout::ColumnMajor>;",
                            "fusion::Sm90RowBroadcast<0, TileShape, ElementBias, ElementCompute, RowStride, kAlignmentBias>"})
    EXPECT_TRUE(contains(src.text, piece)) << "missing " << piece;
  expect_compiles(c, "sm90_3xtf32_rmem_a_bias");
}

// A short A against a large weight (level-2 M = 128 Linear chains): 3xTF32 split in registers ranks first, the
// transposed problem's bias a column vector of D^T.
TEST(GemmCodegenNvcc, Sm90ThreeTf32RegisterSplitCompiles) {
  auto p = GemmProblem::packed(128, 32768, 32768, 1, Numerics::x3tf32, Arch::sm90, /*b_column=*/true,
                               Epilogue::from_json(nlohmann::json::parse(
                                   R"(["sigmoid", ["add", ["mul", "alpha", "acc"], {"row": "bias"}]])")));
  p.b.constant = true;
  GemmConfig c = enumerate_gemm_configs(p, {.top_n = 1}).ranked.front().config;
  ASSERT_EQ(c.mainloop_transform, MainloopTransform::split3_rmem) << c.summary();
    EXPECT_TRUE(c.transposes_problem());
  expect_compiles(c, "sm90_3xtf32_rmem_bias_sigmoid");
}
TEST(GemmCodegenNvcc, Sm80SimtFp32ParallelSplitKCompiles) { expect_compiles(sm80_simt_split_k(), "sm80_simt_splitk"); }
// SwiGLU's epilogue, one kernel per arch: the sm90 visitor tree and the sm80 broadcast epilogue.
TEST(GemmCodegenNvcc, Sm90SiluMulVisitorTreeCompiles) {
  auto c = sm90_bf16_cooperative();
  c.epilogue = Epilogue::named("bias_silu_mul");
  expect_compiles(c, "sm90_bf16_silu_mul");
}
TEST(GemmCodegenNvcc, Sm80SiluMulBroadcastEpilogueCompiles) {
  expect_compiles(sm80_3xtf32(Epilogue::named("bias_silu_mul")), "sm80_3xtf32_silu_mul");
}
// Trees none of the predefined epilogues are: the generated visitor tree with a constant, a residual, every
// node kind between them; and a column broadcast (bias[M]) under max and a GELU.
TEST(GemmCodegenNvcc, Sm90UnnamedEpilogueTreesCompile) {
  auto c = sm90_bf16_cooperative();
  c.epilogue = Epilogue::from_json(nlohmann::json::parse(
      R"(["add", ["mul", ["relu", ["add", ["mul", "acc", "alpha"], {"row": "bias"}]], 0.5], "residual"])"));
  ASSERT_TRUE(c.epilogue.name.empty());
  expect_compiles(c, "sm90_bf16_tree_relu_half_residual");
  c.epilogue = Epilogue::from_json(nlohmann::json::parse(
      R"(["gelu_tanh", ["max", ["sub", ["mul", "alpha", "acc"], {"col": "bias"}], ["mul", "beta", "C"]]])"));
  expect_compiles(c, "sm90_bf16_tree_col_max");
}

// The wrapper is built on the GPU machine; here it is only parsed against the venv's torch headers.
TEST(GemmCodegen, OpWrapperParsesAgainstTorchHeaders) {
  const std::string torch_dir = torch_package_dir();
  if (torch_dir.empty()) GTEST_SKIP() << "no torch headers in " << fact::python_exe();
  auto c = sm80_3xtf32();
  c.epilogue = Epilogue::named("bias");
  fs::path dir = fs::temp_directory_path() / "fact_test_wrapper";
  fs::create_directories(dir);
  std::ofstream(dir / "ops.cpp") << generate_gemm_op_wrapper({sm90_bf16_cooperative(), c}).text;
  auto r = parse_against_torch(torch_dir, dir / "ops.cpp", fact::realize::kernel_abi_include_dir());
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 4000);
}

TEST(GemmCodegen, Sm90ResidualEpilogueRidesInAsCWithBetaOne) {
  auto p = GemmProblem::packed(65536, 768, 3072, 1, Numerics::tf32, Arch::sm90, /*b_column=*/true,
                               Epilogue::named("bias_residual"));
  GemmConfig c = top_config(p, KernelApi::cutlass3_collective);
  auto src = generate_gemm_kernel(c);
  EXPECT_TRUE(contains(src.text, "constexpr bool kHasResidual = true;"));
  // The residual is added to alpha * acc + bias by the tree's root; it is read as the source C.
  EXPECT_TRUE(contains(src.text, "fusion::Sm90Compute<cutlass::plus, ElementD, ElementCompute, kRound>"));
  EXPECT_TRUE(contains(src.text, "fusion::Sm90SrcFetch<ElementC>"));
  EXPECT_TRUE(contains(src.text, "float beta = kHasResidual ? 1.0f"));
  // CUTLASS 2.x kernels take the residual through the broadcast epilogue, data-parallel only.
  for (auto& rc : enumerate_gemm_configs(p, {.top_n = 1000}).ranked) {
    if (rc.config.api != KernelApi::cutlass2_universal) continue;
    EXPECT_EQ(rc.config.split_k_mode, SplitKMode::none) << rc.config.summary();
    EXPECT_EQ(rc.config.tile_scheduler, TileScheduler::data_parallel) << rc.config.summary();
    EXPECT_EQ(generate_gemm_kernel(rc.config).template_name, "cutlass/gemm_sm80_broadcast.cu.in");
  }
}
