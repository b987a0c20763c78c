// The normalization family: rule match -> NormProblem on the MiniGPT and Llama blocks, the config space,
// kernel and op-wrapper generation, the seam's registry, and (tests named *Nvcc*) one real nvcc compile
// per arch (sm_80, sm_90a) of a representative kernel.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "core/paths.h"
#include "core/process.h"
#include "core/arch_spec.h"
#include "discover/matcher.h"
#include "discover/pattern_registry.h"
#include "family_nvcc_check.h"
#include "ir_test_graphs.h"
#include "ir/ir_io.h"
#include "realize/family_tuner.h"
#include "realize/kernel_family.h"
#include "realize/families/normalization/family.h"
#include "realize/kernel_abi_header.h"
#include "realize/nvcc_command.h"
#include "torch_headers_check.h"

namespace fs = std::filesystem;
using namespace fact;
using namespace fact::realize;
using fact::discover::Match;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct Traced {
  fact::ir::Graph graph;
  std::vector<Match> matches;
};

Traced traced(const std::string& fixture) {
  Traced t{fact::ir::load_graph(std::string(FACT_TEST_DATA) + "/ir/" + fixture, fact::ir::OpTable::builtin()), {}};
  auto all = fact::discover::find_all_matches(t.graph, fact::discover::PatternRegistry::builtin(),
                                              fact::ir::OpTable::builtin(), fact::ArchSpec::builtin("sm90"));
  t.matches = fact::discover::resolve_overlaps(all, [](const Match& m) { return static_cast<double>(m.nodes.size()); });
  return t;
}

std::vector<const Match*> of_rule(const Traced& t, const std::string& rule) {
  std::vector<const Match*> out;
  for (const auto& m : t.matches)
    if (m.rule == rule) out.push_back(&m);
  return out;
}

NormProblem minigpt_ln(Element e = Element::f32) {
  NormProblem p;
  p.kind = NormKind::layer_norm;
  p.rows = 128 * 512;
  p.cols = 768;
  p.x_row_stride = 768;
  p.has_weight = p.has_bias = true;
  p.element = e;
  return p;
}

}  // namespace

TEST(NormProblem, MiniGptLayerNormsFromTheRule) {
  auto t = traced("minigpt_block.json");
  auto lns = of_rule(t, "layer_norm");
  ASSERT_EQ(lns.size(), 2u);
  for (const Match* m : lns) {
    ASSERT_EQ(kernel_family_for(*m), &*kernel_family_named("normalization"));
    NormProblem p = norm_problem_from_match(*m, t.graph, Numerics::tf32, Arch::sm90);
    EXPECT_EQ(p.kind, NormKind::layer_norm);
    EXPECT_EQ(p.rows, 128 * 512);
    EXPECT_EQ(p.cols, 768);
    EXPECT_EQ(p.x_row_stride, 768);
    EXPECT_TRUE(p.has_weight);
    EXPECT_TRUE(p.has_bias);
    EXPECT_FALSE(p.has_residual);
    EXPECT_DOUBLE_EQ(p.eps, 1e-5);
    EXPECT_EQ(p.element, Element::f32);  // TF32 is a matmul mode: the norm stays fp32
    EXPECT_EQ(p.numerics(), Numerics::fp32);
    EXPECT_EQ(norm_problem_from_match(*m, t.graph, Numerics::bf16, Arch::sm80).element, Element::bf16);
  }
}

TEST(NormProblem, LlamaWrittenOutRmsNormsFromTheRule) {
  auto t = traced("llama3_block.json");
  // The input norm alone; the post-attention norm with the residual add before it (add_rms_norm).
  auto rms = of_rule(t, "rms_norm");
  ASSERT_EQ(rms.size(), 1u);
  auto fused = of_rule(t, "add_rms_norm");
  ASSERT_EQ(fused.size(), 1u);
  rms.push_back(fused[0]);
  for (const Match* m : rms) {
    NormProblem p = norm_problem_from_match(*m, t.graph, Numerics::fp32, Arch::sm90);
    EXPECT_EQ(p.kind, NormKind::rms_norm);
    EXPECT_EQ(p.rows, 2 * 2048);
    EXPECT_EQ(p.cols, 4096);
    EXPECT_TRUE(p.has_weight);
    EXPECT_FALSE(p.has_bias);
    EXPECT_DOUBLE_EQ(p.eps, 1e-5);  // the module's eps, bound from the written-out add
    EXPECT_EQ(NormProblem::from_json(p.to_json()).to_json(), p.to_json());
  }
}

// The residual add before the norm: both operands are read once; the sum is written only when the graph
// reads it again (Llama's next residual), not in add_layer_norm.py where the norm is its only reader.
TEST(NormProblem, AddNormStoresTheSumOnlyWhenTheGraphReadsIt) {
  auto t = traced("llama3_block.json");
  auto fused = of_rule(t, "add_rms_norm");
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(fused[0]->extra_outputs.at("sum"), "add_3");
  NormProblem p = norm_problem_from_match(*fused[0], t.graph, Numerics::bf16, Arch::sm90);
  EXPECT_TRUE(p.has_residual);
  EXPECT_TRUE(p.store_sum);
  EXPECT_EQ(p.residual_row_stride, 4096);
  EXPECT_EQ(p.element, Element::bf16);
  const KernelFamily* norm = kernel_family_named("normalization");
  EXPECT_EQ(norm->measure_problem(p.to_json()).at("store_sum"), true);
  // Through the seam as `fact tune` goes: the kernel reads the residual and writes the sum, the op returns both.
  auto cands = norm->candidates(norm->problem_from_match(*fused[0], t.graph, Numerics::bf16, Arch::sm90), 1).ranked;
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_TRUE(contains(cands[0].kernel.text, "constexpr bool kHasResidual = true;"));
  EXPECT_TRUE(contains(cands[0].kernel.text, "constexpr bool kStoreSum = true;"));
  EXPECT_TRUE(contains(norm->op_schema(cands[0].config), "-> (Tensor, Tensor)"));

  auto alone = traced("add_layer_norm.json");
  auto ln = of_rule(alone, "add_layer_norm");
  ASSERT_EQ(ln.size(), 1u);
  p = norm_problem_from_match(*ln[0], alone.graph, Numerics::fp32, Arch::sm90);
  EXPECT_EQ(p.kind, NormKind::layer_norm);
  EXPECT_EQ(p.rows, 32 * 512);
  EXPECT_EQ(p.cols, 1024);
  EXPECT_TRUE(p.has_residual && p.has_weight && p.has_bias);
  EXPECT_FALSE(p.store_sum);
  auto plain = kernel_family_named("normalization")->candidates(p.to_json(), 1).ranked;
  EXPECT_TRUE(contains(plain.at(0).kernel.text, "constexpr bool kStoreSum = false;"));

  // A rule that exports a node its kernel block does not map to the sum is refused with the reason.
  Match wrong = *fused[0];
  wrong.kernel.erase("outputs");
  try {
    norm_problem_from_match(wrong, t.graph, Numerics::fp32, Arch::sm90);
    FAIL() << "an exported node with no kernel output must be refused";
  } catch (const fact::Error& e) {
    EXPECT_TRUE(contains(e.what(), "kernel.outputs")) << e.what();
  }
}

// Hugging Face's RMSNorm casts x to fp32 and the normalized value back before the weight: the kernel reads the bf16
// x and computes in fp32 as it does anyway. Where x, the weight and the result differ in dtype (normalized in fp16,
// or a result left fp32), the op could not take them: PyTorch keeps the norm, and the error says why.
TEST(NormProblem, HuggingFaceRmsNormBetweenCastsAndMixedDtypesLeftToPyTorch) {
  auto matched = [](const fact::test::GraphDoc& d, const std::string& rule) {
    fact::ir::Graph g = d.graph();
    for (auto& m : fact::discover::find_all_matches(g, fact::discover::PatternRegistry::builtin(),
                                                    fact::ir::OpTable::builtin(), fact::ArchSpec::builtin("sm90")))
      if (m.rule == rule && m.anchor == "out") return std::make_pair(g, m);
    ADD_FAILURE() << rule << " did not match";
    return std::make_pair(g, Match{});
  };
  for (bool add : {false, true}) {
    auto [g, m] = matched(fact::test::hf_rms_norm("float32", true, add), add ? "add_rms_norm" : "rms_norm");
    NormProblem p = norm_problem_from_match(m, g, Numerics::bf16, Arch::sm90);
    EXPECT_EQ(p.kind, NormKind::rms_norm);
    EXPECT_EQ(p.rows, 4 * 32);
    EXPECT_EQ(p.cols, 768);
    EXPECT_TRUE(p.has_weight);
    EXPECT_EQ(p.has_residual, add);
    EXPECT_EQ(p.store_sum, add);
    EXPECT_DOUBLE_EQ(p.eps, 1e-5);
    EXPECT_EQ(p.element, Element::bf16);
  }
  for (auto [upcast, downcast] : {std::pair<std::string, bool>{"float16", true}, {"float32", false}}) {
    auto [g, m] = matched(fact::test::hf_rms_norm(upcast, downcast, false), "rms_norm");
    try {
      norm_problem_from_match(m, g, Numerics::bf16, Arch::sm90);
      ADD_FAILURE() << "x " << g.at(m.inputs.at("$x")).out().dtype << ", result " << g.at("out").out().dtype
                    << ": mixed dtypes must be refused";
    } catch (const fact::Error& e) {
      EXPECT_TRUE(contains(e.what(), "PyTorch keeps")) << e.what();
    }
  }
}

TEST(NormProblem, BadProblemsNameTheFieldAndFix) {
  NormProblem p = minigpt_ln();
  p.x_row_stride = 700;
  EXPECT_THROW(p.validate(), fact::Error);
  p = minigpt_ln();
  p.kind = NormKind::rms_norm;
  try {
    p.validate();
    FAIL() << "an RMSNorm with a bias must be refused";
  } catch (const fact::Error& e) {
    EXPECT_TRUE(contains(e.what(), "no bias")) << e.what();
  }
  p = minigpt_ln();
  p.store_sum = true;
  EXPECT_THROW(p.validate(), fact::Error);
}

TEST(NormConfigSpace, RankedConfigsHoldTheRowWithWideVectors) {
  NormProblem p = minigpt_ln();
  auto space = enumerate_norm_configs(p, 8);
  EXPECT_GT(space.enumerated, 8);
  ASSERT_EQ(space.ranked.size(), 8u);
  for (const auto& c : space.ranked) {
    EXPECT_EQ(norm_config_rejection(p, c), "") << c.summary();
    EXPECT_GE(c.max_cols(), p.cols) << c.summary();
    EXPECT_LE(c.threads_per_cta(), 1024);
    EXPECT_EQ(NormConfig::from_json(c.to_json()).id(), c.id());
  }
  EXPECT_EQ(space.ranked[0].vector_elems, 4);  // 128-bit loads of fp32
  auto bf16 = enumerate_norm_configs(minigpt_ln(Element::bf16), 4);
  EXPECT_EQ(bf16.ranked[0].vector_elems, 8);   // 128-bit loads of bf16
}

TEST(NormConfigSpace, OddColsFallBackToNarrowVectorsAndHugeRowsAreRefused) {
  NormProblem p = minigpt_ln();
  p.cols = p.x_row_stride = 771;  // odd: only scalar accesses keep every row aligned
  for (const auto& c : enumerate_norm_configs(p, 50).ranked) EXPECT_EQ(c.vector_elems, 1) << c.summary();
  // In 16-bit types too (2-byte accesses): an odd-width bf16 add-norm still gets candidates.
  NormProblem bf = minigpt_ln(Element::bf16);
  bf.cols = bf.x_row_stride = bf.residual_row_stride = 1001;
  bf.has_residual = bf.store_sum = true;
  auto odd16 = enumerate_norm_configs(bf, 50).ranked;
  ASSERT_FALSE(odd16.empty());
  for (const auto& c : odd16) EXPECT_EQ(c.vector_elems, 1) << c.summary();
  // Even widths keep preferring 16-byte vectors, and fp32 has no 2-byte configs (no duplicates of 4-byte ones).
  EXPECT_EQ(enumerate_norm_configs(minigpt_ln(Element::bf16), 1).ranked.at(0).vector_elems, 8);
  auto fp32 = enumerate_norm_configs(minigpt_ln(), 1000).ranked;
  std::set<std::string> ids;
  for (const auto& c : fp32) EXPECT_TRUE(ids.insert(c.id()).second) << c.summary();
  p.cols = p.x_row_stride = 1 << 20;
  try {
    enumerate_norm_configs(p, 8);
    FAIL() << "a 1M-element row cannot live in registers";
  } catch (const fact::Error& e) {
    EXPECT_TRUE(contains(e.what(), "no normalization config")) << e.what();
  }
}

TEST(NormCodegen, KernelCarriesTheConfigAndExportsTheAbi) {
  NormProblem p = minigpt_ln(Element::bf16);
  p.has_residual = p.store_sum = true;
  p.residual_row_stride = 768;
  NormConfig c = enumerate_norm_configs(p, 1).ranked.at(0);
  auto src = generate_norm_kernel(c);
  EXPECT_EQ(src.template_name, "cute/norm_fwd.cu.in");
  EXPECT_FALSE(contains(src.text, "{{"));
  EXPECT_TRUE(contains(src.text, "using Element = cutlass::bfloat16_t;"));
  EXPECT_TRUE(contains(src.text, "constexpr bool kLayerNorm = true;"));
  EXPECT_TRUE(contains(src.text, "constexpr bool kStoreSum = true;"));
  EXPECT_TRUE(contains(src.text, "constexpr int kVector = 8;"));
  EXPECT_TRUE(contains(src.text, "int fact_" + c.id() + "_run(const FactNormArgs* args)"));
  EXPECT_TRUE(contains(src.text, "fact_" + c.id() + "_describe"));
  EXPECT_TRUE(contains(src.text, c.to_json().dump()));
  c.kind = NormKind::rms_norm;  // + bias
  EXPECT_THROW(generate_norm_kernel(c), fact::Error);
}

TEST(NormCodegen, OpWrapperSchemaReturnsTheSumOnlyWhenStored) {
  NormConfig c = enumerate_norm_configs(minigpt_ln(), 1).ranked.at(0);
  EXPECT_EQ(norm_op_schema(c), c.id() + "(Tensor x, Tensor? residual, Tensor? weight, Tensor? bias, float eps) -> Tensor");
  auto w = generate_norm_op_wrapper(c);
  EXPECT_FALSE(contains(w.text, "{{"));
  EXPECT_TRUE(contains(w.text, "TORCH_LIBRARY_IMPL(fact, Meta, m)"));
  EXPECT_TRUE(contains(w.text, "\"" + norm_op_schema(c) + "\"); }"));
  c.has_residual = c.store_sum = true;
  EXPECT_TRUE(contains(norm_op_schema(c), "-> (Tensor, Tensor)"));
  EXPECT_TRUE(contains(generate_norm_op_wrapper(c).text, "std::make_tuple(y, sum)"));
}

TEST(KernelFamilySeam, RegistryMeasureRequestAndKeys) {
  const KernelFamily* norm = kernel_family_named("normalization");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(kernel_family_named("no_such_family"), nullptr);
  auto problem = minigpt_ln().to_json();
  auto cands = norm->candidates(problem, 3).ranked;
  ASSERT_EQ(cands.size(), 3u);
  EXPECT_EQ(norm->candidate_from_config(cands[1].config).kernel.text, cands[1].kernel.text);
  auto req = family_measure_request(*norm, problem, {{cands[0].config_id, "/tmp/x.so", cands[0].config_id}});
  EXPECT_EQ(req["family"], "normalization");
  EXPECT_EQ(req["problem"]["dtype"], "float32");
  EXPECT_EQ(req["problem"]["kind"], "layer_norm");
  EXPECT_EQ(req["candidates"][0]["id"], cands[0].config_id);
  EXPECT_FALSE(req.contains("timeout_s")) << "the runner's default limit";
  BuiltLibraries one = {{cands[0].config_id, "/tmp/x.so", cands[0].config_id}};
  setenv("FACT_MEASURE_TIMEOUT_S", "7.5", 1);
  EXPECT_EQ(family_measure_request(*norm, problem, one)["timeout_s"], 7.5);
  setenv("FACT_MEASURE_TIMEOUT_S", "soon", 1);
  EXPECT_THROW(family_measure_request(*norm, problem, one), fact::Error);
  unsetenv("FACT_MEASURE_TIMEOUT_S");
  auto nvcc = nvcc_command(Arch::sm80, "k.cu", "k.so", "/cutlass");
  EXPECT_NE(std::find(nvcc.begin(), nvcc.end(), "-gencode=arch=compute_80,code=sm_80"), nvcc.end());
}

namespace {

void expect_norm_compiles(const NormProblem& p, const std::string& name) {
  NormConfig c = enumerate_norm_configs(p, 1).ranked.at(0);
  expect_kernel_compiles(c.arch, generate_norm_kernel(c).text, name, c.summary());
}

}  // namespace

TEST(NormCodegenNvcc, Sm80Bf16LayerNormWithResidualCompiles) {
  NormProblem p = minigpt_ln(Element::bf16);
  p.arch = Arch::sm80;
  p.has_residual = p.store_sum = true;
  p.residual_row_stride = 768;
  expect_norm_compiles(p, "sm80_bf16_add_layer_norm");
}

TEST(NormCodegenNvcc, Sm90Fp32RmsNormCtaPerRowCompiles) {
  NormProblem p;
  p.kind = NormKind::rms_norm;
  p.rows = 4096;
  p.cols = p.x_row_stride = 4096;
  p.has_weight = true;
  p.arch = Arch::sm90;
  expect_norm_compiles(p, "sm90_fp32_rms_norm");
}

#include "realize/families/attention/family.h"
#include "realize/families/gemm/gemm_codegen.h"
#include "realize/families/rope/family.h"

TEST(KernelFamilySeam, OpWrappersParseAgainstTorchHeaders) {
  const std::string torch_dir = torch_package_dir();
  if (torch_dir.empty()) GTEST_SKIP() << "no torch headers in " << fact::python_exe();
  NormConfig plain = enumerate_norm_configs(minigpt_ln(), 1).ranked.at(0);
  NormProblem fused = minigpt_ln(Element::bf16);
  fused.has_residual = fused.store_sum = true;
  fused.residual_row_stride = 768;
  NormConfig with_sum = enumerate_norm_configs(fused, 1).ranked.at(0);
  fs::path dir = fs::temp_directory_path() / "fact_test_family_wrapper";
  fs::create_directories(dir);
  // As the op library writes it: the preamble of templates/cutlass/op_wrapper.cpp.in, then each op.
  std::ofstream(dir / "ops.cpp") << fact::realize::op_library_source({generate_norm_op_wrapper(plain).text,
                                                                      generate_norm_op_wrapper(with_sum).text,
                                                                      generate_attention_op_wrapper(AttentionConfig{}).text,
                                                                      generate_rope_op_wrapper(RopeConfig{}).text})
                                        .text;
  auto r = parse_against_torch(torch_dir, dir / "ops.cpp", fact::realize::kernel_abi_include_dir());
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 4000);
}
