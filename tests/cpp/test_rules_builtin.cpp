// Each built-in rule (data/rules/) matching a small graph, and not matching when one thing is off.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "core/error.h"
#include "core/paths.h"
#include "core/arch_spec.h"
#include "discover/matcher.h"
#include "discover/pattern_registry.h"
#include "ir_test_graphs.h"

using fact::discover::Match;
using fact::test::GraphDoc;
using fact::test::hf_rms_norm;
using fact::test::ref_to;
using Json = nlohmann::json;

namespace {

// The match anchored at `anchor` that survives overlap resolution by nodes covered, or "" if none.
std::string winner(const GraphDoc& d, const std::string& anchor, const std::string& arch = "sm90") {
  auto all = fact::discover::find_all_matches(d.graph(), fact::discover::PatternRegistry::builtin(),
                                              fact::ir::OpTable::builtin(), fact::ArchSpec::builtin(arch));
  auto kept = fact::discover::resolve_overlaps(all, [](const Match& m) { return double(m.nodes.size()); });
  for (const auto& m : kept)
    if (m.anchor == anchor) return m.rule;
  return "";
}

// linear(x[64,256], w[512,256], b) -> activation chain built by `tail`, in `dtype`.
GraphDoc linear_then(const std::string& dtype, const std::function<void(GraphDoc&)>& tail) {
  GraphDoc d;
  d.input("x", {64, 256}, dtype).input("w", {512, 256}, dtype, "parameter").input("b", {512}, dtype, "parameter");
  d.op("lin", "aten.linear.default", {ref_to("x"), ref_to("w"), ref_to("b")}, {64, 512}, dtype);
  tail(d);
  return d;
}

GraphDoc with_act(const std::string& op, const std::string& dtype = "float32", Json kwargs = Json::object(),
                  bool extra_use = false) {
  return linear_then(dtype, [&](GraphDoc& d) {
    d.op("act", op, {ref_to("lin")}, {64, 512}, dtype, kwargs).output("act");
    if (extra_use) d.output("lin");
  });
}

GraphDoc new_gelu(double cubic_coeff) {
  return linear_then("bfloat16", [&](GraphDoc& d) {
    const std::vector<int64_t> s{64, 512};
    d.op("half", "aten.mul.Tensor", {ref_to("lin"), 0.5}, s, "bfloat16");
    d.op("cube", "aten.pow.Tensor_Scalar", {ref_to("lin"), 3.0}, s, "bfloat16");
    d.op("cubic", "aten.mul.Tensor", {ref_to("cube"), cubic_coeff}, s, "bfloat16");
    d.op("inner", "aten.add.Tensor", {ref_to("lin"), ref_to("cubic")}, s, "bfloat16");
    d.op("scaled", "aten.mul.Tensor", {ref_to("inner"), 0.7978845608028654}, s, "bfloat16");
    d.op("th", "aten.tanh.default", {ref_to("scaled")}, s, "bfloat16");
    d.op("one_plus", "aten.add.Tensor", {1.0, ref_to("th")}, s, "bfloat16");
    d.op("out", "aten.mul.Tensor", {ref_to("one_plus"), ref_to("half")}, s, "bfloat16").output("out");
  });
}

GraphDoc matmul(std::vector<int64_t> a, std::vector<int64_t> b, std::vector<int64_t> out, const std::string& op) {
  GraphDoc d;
  d.input("a", a).input("b", b).op("mm", op, {ref_to("a"), ref_to("b")}, out).output("mm");
  return d;
}

}  // namespace

TEST(RulesBuiltin, LoadAndPointAtExistingExamples) {
  auto reg = fact::discover::PatternRegistry::builtin();
  for (const char* name : {"gemm", "batched_gemm", "large_k_gemm", "gemm_bias_relu", "gemm_bias_silu", "gemm_bias_gelu_erf",
                           "gemm_bias_gelu_tanh", "gemm_bias_residual", "gemm_swiglu", "sdpa_attention_manual", "sdpa_attention",
                           "layer_norm", "rms_norm"})
    EXPECT_NE(reg.find(name), nullptr) << name;
  std::filesystem::path examples;
  try {
    examples = fact::cutlass_dir() / "examples";
  } catch (const fact::Error&) {
    GTEST_SKIP() << "no CUTLASS here to check example folders against";
  }
  for (const auto& r : reg.rules())
    for (const auto& e : r.examples)
      EXPECT_TRUE(std::filesystem::is_directory(examples / e.substr(8))) << r.name << ": " << e;
}

TEST(RulesBuiltin, GemmFamilies) {
  EXPECT_EQ(winner(matmul({1024, 1024}, {1024, 1024}, {1024, 1024}, "aten.mm.default"), "mm"), "gemm");
  EXPECT_EQ(winner(matmul({256, 65536}, {65536, 256}, {256, 256}, "aten.matmul.default"), "mm"), "large_k_gemm");
  EXPECT_EQ(winner(matmul({256, 4096}, {4096, 256}, {256, 256}, "aten.mm.default"), "mm"), "gemm");  // K too small
  EXPECT_EQ(winner(matmul({8, 64, 32}, {8, 32, 16}, {8, 64, 16}, "aten.bmm.default"), "mm"), "batched_gemm");
  EXPECT_EQ(winner(matmul({8, 64, 32}, {1, 32, 16}, {8, 64, 16}, "aten.matmul.default"), "mm"), "");  // broadcast batch
  EXPECT_EQ(winner(matmul({8, 64, 32}, {32, 16}, {8, 64, 16}, "aten.matmul.default"), "mm"), "gemm");  // folds into M
  GraphDoc ints = matmul({64, 64}, {64, 64}, {64, 64}, "aten.mm.default");
  ints.json()["nodes"][2]["outputs"][0]["dtype"] = "int32";
  EXPECT_EQ(winner(ints, "mm"), "");
}

TEST(RulesBuiltin, GemmEpilogues) {
  EXPECT_EQ(winner(with_act("aten.relu.default"), "act"), "gemm_bias_relu");
  EXPECT_EQ(winner(with_act("aten.relu.default", "float64"), "act"), "");
  EXPECT_EQ(winner(with_act("aten.relu.default", "float32", Json::object(), true), "act"), "");  // lin used outside
  EXPECT_EQ(winner(with_act("aten.silu.default", "float16"), "act"), "gemm_bias_silu");
  EXPECT_EQ(winner(with_act("aten.gelu.default"), "act"), "gemm_bias_gelu_erf");
  EXPECT_EQ(winner(with_act("aten.gelu.default", "float32", {{"approximate", "tanh"}}), "act"), "gemm_bias_gelu_tanh");
  EXPECT_EQ(winner(new_gelu(0.044715), "out"), "gemm_bias_gelu_tanh");
  EXPECT_EQ(winner(new_gelu(0.05), "out"), "");  // wrong constant: not NewGELU
}

TEST(RulesBuiltin, GemmResidual) {
  auto residual = [](bool same_shape) {
    return linear_then("float32", [&](GraphDoc& d) {
      d.input("r", same_shape ? std::vector<int64_t>{64, 512} : std::vector<int64_t>{512});
      d.op("out", "aten.add.Tensor", {ref_to("r"), ref_to("lin")}, {64, 512}).output("out");
    });
  };
  EXPECT_EQ(winner(residual(true), "out"), "gemm_bias_residual");
  EXPECT_EQ(winner(residual(false), "out"), "");  // a broadcast add is a bias, not a residual
}

TEST(RulesBuiltin, Attention) {
  auto manual = [](double fill, const std::string& dtype) {
    GraphDoc d;
    const std::vector<int64_t> qs{2, 4, 128, 64}, ss{2, 4, 128, 128};
    d.input("q", qs, dtype).input("k", qs, dtype).input("v", qs, dtype).input("mask", {1, 1, 128, 128}, "bool");
    d.op("kt", "aten.transpose.int", {ref_to("k"), -2, -1}, {2, 4, 64, 128}, dtype);
    d.op("qk", "aten.matmul.default", {ref_to("q"), ref_to("kt")}, ss, dtype);
    d.op("sc", "aten.div.Tensor", {ref_to("qk"), 8.0}, ss, dtype);
    d.op("mf", "aten.masked_fill.Scalar", {ref_to("sc"), ref_to("mask"), fill}, ss, dtype);
    d.op("p", "aten.softmax.int", {ref_to("mf"), -1}, ss, dtype);
    d.op("o", "aten.matmul.default", {ref_to("p"), ref_to("v")}, qs, dtype).output("o");
    return d;
  };
  GraphDoc causal = manual(0.0, "float16");
  causal.json()["nodes"][7]["args"][2] = {{"float", "-inf"}};
  EXPECT_EQ(winner(causal, "o"), "sdpa_attention_manual");
  EXPECT_EQ(winner(manual(0.0, "float16"), "o"), "batched_gemm");  // fill 0 is no causal mask: plain bmm
  GraphDoc sdpa;
  sdpa.input("q", {2, 8, 128, 64}, "bfloat16").input("k", {2, 8, 128, 64}, "bfloat16").input("v", {2, 8, 128, 64}, "bfloat16");
  sdpa.op("o", "aten.scaled_dot_product_attention.default", {ref_to("q"), ref_to("k"), ref_to("v")}, {2, 8, 128, 64}, "bfloat16");
  sdpa.output("o");
  EXPECT_EQ(winner(sdpa, "o"), "sdpa_attention");
  sdpa.json()["nodes"][3]["args"] = {ref_to("q"), ref_to("k"), ref_to("v"), nullptr, 0.1};
  EXPECT_EQ(winner(sdpa, "o"), "");  // dropout 0.1
}

TEST(RulesBuiltin, NormsAndSoftmax) {
  GraphDoc ln;
  ln.input("x", {32, 768}).input("w", {768}, "float32", "parameter").input("b", {768}, "float32", "parameter");
  ln.op("ln", "aten.layer_norm.default", {ref_to("x"), {768}, ref_to("w"), ref_to("b"), 1e-5, false}, {32, 768}).output("ln");
  EXPECT_EQ(winner(ln, "ln"), "layer_norm");
  ln.json()["nodes"][3]["args"][1] = {32, 768};  // two normalized dims: not this kernel
  EXPECT_EQ(winner(ln, "ln"), "");

  auto rms = [](double power) {
    GraphDoc d;
    d.input("x", {32, 768}).input("w", {768}, "float32", "parameter");
    d.op("sq", "aten.pow.Tensor_Scalar", {ref_to("x"), power}, {32, 768});
    d.op("ms", "aten.mean.dim", {ref_to("sq"), {-1}, true}, {32, 1});
    d.op("ve", "aten.add.Tensor", {ref_to("ms"), 1e-6}, {32, 1});
    d.op("rs", "aten.rsqrt.default", {ref_to("ve")}, {32, 1});
    d.op("nm", "aten.mul.Tensor", {ref_to("x"), ref_to("rs")}, {32, 768});
    d.op("out", "aten.mul.Tensor", {ref_to("w"), ref_to("nm")}, {32, 768}).output("out");
    return d;
  };
  EXPECT_EQ(winner(rms(2), "out"), "rms_norm");
  EXPECT_EQ(winner(rms(3), "out"), "");

  // Softmax has no rule: the generated row-wise pass takes it (test_rowwise_generated.cpp).
  GraphDoc sm;
  sm.input("x", {32, 100}).op("s", "aten.softmax.int", {ref_to("x"), 1}, {32, 100}).output("s");
  EXPECT_EQ(winner(sm, "s"), "");
}

namespace {

// h = x + y (y shaped `y_shape`), then LayerNorm(h) or the written-out RMSNorm of h; `reuse`: h is read again
// after the norm (the next residual), `reuse_before`: h is read by an op before the norm.
GraphDoc add_norm(const std::string& kind, std::vector<int64_t> y_shape = {4, 32, 768}, bool reuse = false,
                  bool reuse_before = false, const std::string& dtype = "float32") {
  const std::vector<int64_t> s{4, 32, 768};
  GraphDoc d;
  d.input("x", s, dtype).input("y", y_shape, dtype).input("w", {768}, dtype, "parameter");
  d.input("b", {768}, dtype, "parameter");
  d.op("h", "aten.add.Tensor", {ref_to("x"), ref_to("y")}, s, dtype);
  if (reuse_before) d.op("early", "aten.mul.Tensor", {ref_to("h"), 2.0}, s, dtype).output("early");
  if (kind == "layer_norm") {
    d.op("out", "aten.layer_norm.default", {ref_to("h"), {768}, ref_to("w"), ref_to("b"), 1e-5, false}, s, dtype);
  } else {
    d.op("sq", "aten.pow.Tensor_Scalar", {ref_to("h"), 2}, s, dtype);
    d.op("ms", "aten.mean.dim", {ref_to("sq"), {-1}, true}, {4, 32, 1}, dtype);
    d.op("ve", "aten.add.Tensor", {ref_to("ms"), 1e-6}, {4, 32, 1}, dtype);
    d.op("rs", "aten.rsqrt.default", {ref_to("ve")}, {4, 32, 1}, dtype);
    d.op("nm", "aten.mul.Tensor", {ref_to("h"), ref_to("rs")}, s, dtype);
    d.op("out", "aten.mul.Tensor", {ref_to("nm"), ref_to("w")}, s, dtype);
  }
  d.output("out");
  if (reuse) d.op("next", "aten.add.Tensor", {ref_to("h"), ref_to("out")}, s, dtype).output("next");
  return d;
}

const Match* anchored(const std::vector<Match>& ms, const std::string& rule, const std::string& anchor) {
  for (const auto& m : ms)
    if (m.rule == rule && m.anchor == anchor) return &m;
  return nullptr;
}

std::vector<Match> all_matches(const GraphDoc& d) {
  return fact::discover::find_all_matches(d.graph(), fact::discover::PatternRegistry::builtin(),
                                          fact::ir::OpTable::builtin(), fact::ArchSpec::builtin("sm90"));
}

}  // namespace

TEST(RulesBuiltin, AddNormsCoverTheResidualAddAndExportTheSumWhenReadAgain) {
  for (std::string kind : {"layer_norm", "rms_norm"}) {
    SCOPED_TRACE(kind);
    const std::string rule = "add_" + kind;
    auto alone = all_matches(add_norm(kind));
    const Match* m = anchored(alone, rule, "out");
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->nodes.front(), "h");
    EXPECT_TRUE(m->extra_outputs.empty());  // the sum is read by the norm only
    EXPECT_EQ(m->dims.at("rows"), 4 * 32);
    EXPECT_EQ(m->dims.at("cols"), 768);
    EXPECT_EQ(m->inputs.count("$x") + m->inputs.count("$residual"), 2u);
    EXPECT_EQ(m->kernel.at("kind"), kind);
    EXPECT_EQ(m->kernel.at("outputs").at("sum"), "sum");
    EXPECT_EQ(winner(add_norm(kind), "out"), rule);

    auto reused = all_matches(add_norm(kind, {4, 32, 768}, true));
    m = anchored(reused, rule, "out");
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->extra_outputs, (std::map<std::string, std::string>{{"sum", "h"}}));
    EXPECT_EQ(winner(add_norm(kind, {4, 32, 768}, true), "out"), rule);
    // It wins over the plain norm at the same anchor even at equal gain: its priority.
    auto flat = fact::discover::resolve_overlaps(reused, [](const Match&) { return 1.0; });
    ASSERT_NE(anchored(flat, rule, "out"), nullptr);
    EXPECT_EQ(anchored(flat, kind, "out"), nullptr);
    EXPECT_EQ(winner(add_norm(kind, {4, 32, 768}, true, false, "bfloat16"), "out"), rule);
  }
}

TEST(RulesBuiltin, AddNormNearMissesLeaveThePlainNorm) {
  for (std::string kind : {"layer_norm", "rms_norm"}) {
    SCOPED_TRACE(kind);
    const std::string rule = "add_" + kind;
    // The other operand broadcasts (a bias-like [768] or a per-row [4, 32, 1]): not a residual.
    for (std::vector<int64_t> y : {std::vector<int64_t>{768}, std::vector<int64_t>{4, 32, 1}}) {
      EXPECT_EQ(anchored(all_matches(add_norm(kind, y)), rule, "out"), nullptr);
      EXPECT_EQ(winner(add_norm(kind, y), "out"), kind);
    }
    // The sum is read before the norm: the op at the norm would define it too late.
    auto early = add_norm(kind, {4, 32, 768}, false, true);
    EXPECT_EQ(anchored(all_matches(early), rule, "out"), nullptr);
    EXPECT_EQ(winner(early, "out"), kind);
    // add(x, y, alpha=2) is not x + y.
    auto alpha = add_norm(kind);
    alpha.json()["nodes"][4]["kwargs"] = {{"alpha", 2}};
    EXPECT_EQ(winner(alpha, "out"), kind);
  }
  // An add that feeds something other than a norm is no add-norm.
  GraphDoc relu;
  relu.input("x", {4, 768}).input("y", {4, 768});
  relu.op("h", "aten.add.Tensor", {ref_to("x"), ref_to("y")}, {4, 768});
  relu.op("r", "aten.relu.default", {ref_to("h")}, {4, 768}).output("r");
  for (const auto& m : all_matches(relu)) EXPECT_NE(m.family, "normalization") << m.rule;
}

TEST(RulesBuiltin, HuggingFaceRmsNormComputesInFp32BetweenItsCasts) {
  auto alone = all_matches(hf_rms_norm("float32", true, false));
  const Match* m = anchored(alone, "rms_norm", "out");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->inputs.at("$x"), "x");  // the bf16 tensor the kernel reads, not its fp32 copy
  EXPECT_EQ(m->nodes, (std::vector<std::string>{"h32", "sq", "ms", "ve", "rs", "nm", "nm16", "out"}));
  EXPECT_DOUBLE_EQ(m->attrs.at("eps").get<double>(), 1e-5);
  EXPECT_EQ(m->dims.at("rows"), 4 * 32);
  EXPECT_EQ(m->dims.at("cols"), 768);
  EXPECT_EQ(winner(hf_rms_norm("float32", true, false), "out"), "rms_norm");

  auto fused = all_matches(hf_rms_norm("float32", true, true));
  m = anchored(fused, "add_rms_norm", "out");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->nodes.front(), "h");
  EXPECT_EQ(m->extra_outputs, (std::map<std::string, std::string>{{"sum", "h"}}));
  EXPECT_EQ(winner(hf_rms_norm("float32", true, true), "out"), "add_rms_norm");

  // Computed in fp16, not fp32: only the fp16 copy is the norm's x (a bf16 result of an fp16 x, which the
  // normalization family leaves to PyTorch: test_norm_family.cpp).
  auto half = all_matches(hf_rms_norm("float16", true, false));
  m = anchored(half, "rms_norm", "out");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->inputs.at("$x"), "h32");
}
