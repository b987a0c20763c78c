// The roofline cost model: per-node FLOPs/bytes/time, how numerics, wave quantization and causality
// move the estimates, and the ranking it gives the MiniGPT plan (fixtures in data/ir/).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/arch_spec.h"
#include "discover/cost_model.h"
#include "discover/matcher.h"
#include "discover/pattern_registry.h"
#include "discover/plan.h"
#include "ir/ir_io.h"
#include "ir_test_graphs.h"

using fact::ArchSpec;
using fact::discover::CostContext;
using fact::discover::Match;
using fact::test::GraphDoc;
using fact::test::Json;
using fact::test::ref_to;

namespace {

const fact::ir::OpTable& ops() { return fact::ir::OpTable::builtin(); }
const ArchSpec& sm90() {
  static const ArchSpec a = ArchSpec::builtin("sm90");
  return a;
}
const fact::discover::PatternRegistry& rules() {
  static const auto r = fact::discover::PatternRegistry::builtin();
  return r;
}

fact::ir::Graph fixture(const std::string& name) {
  return fact::ir::load_graph(std::string(FACT_TEST_DATA) + "/ir/" + name, ops());
}

// The single match of `rule` anchored at `anchor` (matches before overlap resolution).
Match match_of(const fact::ir::Graph& g, const std::string& rule, const std::string& anchor) {
  for (auto& m : fact::discover::find_all_matches(g, rules(), ops(), sm90()))
    if (m.rule == rule && m.anchor == anchor) return m;
  ADD_FAILURE() << "no " << rule << " match anchored at " << anchor;
  return {};
}

// Wave efficiency of `tiles` output tiles on the arch's SMs (what cuBLAS-like libraries get).
double waves_eff(double tiles, int sms) { return tiles / (std::ceil(tiles / sms) * sms); }

}  // namespace

TEST(CostModel, GemmFlopsAndBytesComeFromShapes) {
  GraphDoc d;
  d.input("a", {64, 128}).input("b", {128, 32}).op("mm", "aten.mm.default", {ref_to("a"), ref_to("b")}, {64, 32});
  d.input("x", {4, 16, 128}).input("w", {48, 128}).input("bias", {48});
  d.op("lin", "aten.linear.default", {ref_to("x"), ref_to("w"), ref_to("bias")}, {4, 16, 48});
  d.input("c", {64, 32}).op("am", "aten.addmm.default", {ref_to("c"), ref_to("a"), ref_to("b")}, {64, 32});
  d.output("mm").output("lin").output("am");
  auto g = d.graph();
  CostContext ctx{g, sm90(), fact::Numerics::x3tf32};

  auto mm = fact::discover::estimate_node(g.at("mm"), ctx);
  EXPECT_DOUBLE_EQ(mm.flops, 2.0 * 64 * 32 * 128);
  EXPECT_DOUBLE_EQ(mm.bytes, 4.0 * (64 * 128 + 128 * 32 + 64 * 32));
  EXPECT_EQ(mm.kernels, 1);
  EXPECT_GT(mm.seconds, sm90().launch_overhead_s);

  // linear: K is the last dim of x (not of the weight), M covers the leading dims.
  auto lin = fact::discover::estimate_node(g.at("lin"), ctx);
  EXPECT_DOUBLE_EQ(lin.flops, 2.0 * (4 * 16) * 48 * 128);
  EXPECT_DOUBLE_EQ(lin.bytes, 4.0 * (4 * 16 * 128 + 48 * 128 + 48 + 4 * 16 * 48));

  // addmm(c, a, b): K comes from a (args[1]), not from the bias c.
  auto am = fact::discover::estimate_node(g.at("am"), ctx);
  EXPECT_DOUBLE_EQ(am.flops, 2.0 * 64 * 32 * 128);

  // Placeholders cost nothing.
  auto in = fact::discover::estimate_node(g.at("a"), ctx);
  EXPECT_EQ(in.flops, 0);
  EXPECT_EQ(in.seconds, 0);
  EXPECT_EQ(in.kernels, 0);
}

TEST(CostModel, ViewsAreFreeAndElementwiseIsBytes) {
  GraphDoc d;
  d.input("x", {1024, 1024});
  d.op("v", "aten.view.default", {ref_to("x"), Json::array({1024 * 1024})}, {1024 * 1024});
  d.op("t", "aten.t.default", {ref_to("x")}, {1024, 1024});
  d.op("r", "aten.relu.default", {ref_to("x")}, {1024, 1024});
  d.op("s", "aten.add.Tensor", {ref_to("x"), ref_to("r")}, {1024, 1024});
  d.output("v").output("t").output("s");
  auto g = d.graph();
  CostContext ctx{g, sm90(), fact::Numerics::x3tf32};
  const ArchSpec& a = sm90();

  for (const char* view : {"v", "t"}) {
    auto c = fact::discover::estimate_node(g.at(view), ctx);
    EXPECT_EQ(c.flops, 0) << view;
    EXPECT_EQ(c.bytes, 0) << view;
    EXPECT_EQ(c.seconds, 0) << view;
    EXPECT_EQ(c.kernels, 0) << view;
  }
  const double n = 1024.0 * 1024;
  auto relu = fact::discover::estimate_node(g.at("r"), ctx);
  EXPECT_DOUBLE_EQ(relu.flops, n);
  EXPECT_DOUBLE_EQ(relu.bytes, 2 * 4 * n);  // read x, write r
  EXPECT_NEAR(relu.seconds, relu.bytes / a.dram_bytes_per_s + a.launch_overhead_s, 1e-12);
  auto add = fact::discover::estimate_node(g.at("s"), ctx);
  EXPECT_DOUBLE_EQ(add.bytes, 3 * 4 * n);   // two inputs, one output
  EXPECT_GT(add.seconds, relu.seconds);

  // The whole module: the sum over nodes, views adding nothing.
  EXPECT_NEAR(fact::discover::estimate_graph_seconds(ctx), relu.seconds + add.seconds, 1e-12);
}

TEST(CostModel, NumericsSetThePyTorchBaselineRate) {
  auto g32 = fixture("square_matmul_4096.json");
  const ArchSpec& a = sm90();
  const double flops = 2.0 * 4096 * 4096 * 4096;
  const double eff = waves_eff(32.0 * 32, a.sm_count);  // 128x128 library tiles
  auto now = [&](const fact::ir::Graph& g, const std::string& numerics) {
    CostContext ctx{g, a, fact::numerics_from_string(numerics)};
    return fact::discover::estimate_node(g.at("matmul"), ctx).seconds;
  };
  double fp32 = now(g32, "fp32"), x3 = now(g32, "3xtf32"), tf32 = now(g32, "tf32");
  EXPECT_NEAR(fp32, flops / (a.gemm_flops.at("fp32") * eff) + a.launch_overhead_s, 1e-9);
  EXPECT_DOUBLE_EQ(x3, fp32);  // 3xtf32 is compared against PyTorch's fp32 "highest"
  EXPECT_NEAR(tf32, flops / (a.gemm_flops.at("tf32") * eff) + a.launch_overhead_s, 1e-9);
  EXPECT_GT(fp32 / tf32, 5.0);

  // The same GEMM as a bfloat16 graph: half the bytes, the bf16 tensor-core rate.
  GraphDoc d;
  d.input("a", {4096, 4096}, "bfloat16").input("b", {4096, 4096}, "bfloat16");
  d.op("matmul", "aten.matmul.default", {ref_to("a"), ref_to("b")}, {4096, 4096}, "bfloat16").output("matmul");
  auto g16 = d.graph();
  CostContext ctx16{g16, a, fact::Numerics::bf16};
  auto bf16 = fact::discover::estimate_node(g16.at("matmul"), ctx16);
  EXPECT_DOUBLE_EQ(bf16.bytes, 3 * 2.0 * 4096 * 4096);
  EXPECT_NEAR(bf16.seconds, flops / (a.gemm_flops.at("bf16") * eff) + a.launch_overhead_s, 1e-9);
  EXPECT_LT(bf16.seconds, tf32);

  // FACT's fused kernel runs at the mode's own rate: 3xtf32 beats the fp32 SIMT kernel.
  Match m = match_of(g32, "gemm", "matmul");
  CostContext c_fp32{g32, a, fact::Numerics::fp32}, c_3x{g32, a, fact::Numerics::x3tf32};
  auto e_fp32 = fact::discover::estimate_match(m, c_fp32), e_3x = fact::discover::estimate_match(m, c_3x);
  EXPECT_DOUBLE_EQ(e_fp32.seconds_now, e_3x.seconds_now);
  EXPECT_LT(e_3x.seconds_fused, e_fp32.seconds_fused);
  EXPECT_GT(e_3x.gain_seconds(), 0);
  EXPECT_EQ(e_3x.bound, "compute");
}

TEST(CostModel, WaveQuantizationHurtsLargeKNowButSplitKFillsTheChip) {
  auto g = fixture("large_k_matmul.json");  // 256x256 output, K = 131072: four 128x128 tiles on 132 SMs
  const ArchSpec& a = sm90();
  CostContext ctx{g, a, fact::Numerics::x3tf32};
  const double flops = 2.0 * 256 * 256 * 131072;

  auto node = fact::discover::estimate_node(g.at("matmul"), ctx);
  EXPECT_DOUBLE_EQ(node.flops, flops);
  double ideal_now = flops / a.gemm_flops.at("fp32");
  EXPECT_GT(node.seconds, 20 * ideal_now);  // 4 of 132 SMs busy
  EXPECT_NEAR(node.seconds, ideal_now * a.sm_count / 4 + a.launch_overhead_s, 1e-9);

  Match m = match_of(g, "large_k_gemm", "matmul");
  ASSERT_EQ(m.dims.at("K"), 131072);
  auto e = fact::discover::estimate_match(m, ctx);
  EXPECT_DOUBLE_EQ(e.seconds_now, node.seconds);
  double roofline = flops / a.gemm_flops.at("3xtf32");
  EXPECT_EQ(e.bound, "compute");
  EXPECT_GE(e.seconds_fused, roofline);
  EXPECT_LT(e.seconds_fused, 1.1 * roofline + a.launch_overhead_s);  // split-K slices fill every SM
  EXPECT_GT(e.speedup(), 30.0);
  // Minimum traffic: both operands and the result, once.
  EXPECT_DOUBLE_EQ(e.bytes_fused, 4.0 * (2 * 256 * 131072 + 256 * 256));

  // Without enough K to split (K < 1024) the same small output keeps its partial wave.
  Match small_k = m;
  small_k.dims["K"] = 512;
  auto e_small = fact::discover::estimate_match(small_k, ctx);
  double small_flops = 2.0 * 256 * 256 * 512;
  EXPECT_GT(e_small.seconds_fused - a.launch_overhead_s, 20 * small_flops / a.gemm_flops.at("3xtf32"));
}

TEST(CostModel, CausalManualAttentionHalvesFusedFlops) {
  auto g = fixture("minigpt_block.json");
  const ArchSpec& a = sm90();
  CostContext ctx{g, a, fact::Numerics::x3tf32};
  Match causal = match_of(g, "sdpa_attention_manual", "matmul_1");
  ASSERT_EQ(causal.attrs.at("causal"), true);
  Match full = causal;
  full.attrs["causal"] = false;

  auto ec = fact::discover::estimate_match(causal, ctx), ef = fact::discover::estimate_match(full, ctx);
  // PyTorch's matmuls compute the masked triangle either way; only the fused kernel skips it.
  EXPECT_DOUBLE_EQ(ec.flops, ef.flops);
  EXPECT_DOUBLE_EQ(ec.seconds_now, ef.seconds_now);
  EXPECT_EQ(ec.kernels_now, 6);  // transpose_3 is a view
  ASSERT_EQ(ec.bound, "compute");
  ASSERT_EQ(ef.bound, "compute");
  EXPECT_NEAR((ef.seconds_fused - a.launch_overhead_s) / (ec.seconds_fused - a.launch_overhead_s), 2.0, 1e-9);
  // The two batched matmuls dominate the chain's FLOPs: 4 * B*H * T*T * D.
  double qk_pv = 4.0 * 128 * 8 * 512 * 512 * 96;
  EXPECT_GE(ec.flops, qk_pv);
  EXPECT_LT(ec.flops, 1.05 * qk_pv);
}

TEST(CostModel, SdpaNodeAlreadyExcludesTheMaskedTriangle) {
  auto g = fixture("llama3_block.json");
  CostContext ctx{g, sm90(), fact::Numerics::x3tf32};
  Match m = match_of(g, "sdpa_attention", "scaled_dot_product_attention");
  ASSERT_EQ(m.attrs.at("causal"), true);
  Match not_causal = m;
  not_causal.attrs["causal"] = false;
  // An sdpa anchor's FLOPs are already halved by the node cost, so the match must not halve them again.
  EXPECT_DOUBLE_EQ(fact::discover::estimate_match(m, ctx).seconds_fused,
                   fact::discover::estimate_match(not_causal, ctx).seconds_fused);
  const auto& sdpa = g.at("scaled_dot_product_attention");
  auto& q = g.at(fact::ir::ref_name(sdpa.args[0])).out();
  auto& k = g.at(fact::ir::ref_name(sdpa.args[1])).out();
  double full = 4.0 * (q.numel() / (q.shape[2] * q.shape[3])) * q.shape[2] * k.shape[2] * q.shape[3];
  EXPECT_DOUBLE_EQ(fact::discover::estimate_node(sdpa, ctx).flops, full / 2);
}

TEST(CostModel, BaselineNumerics) {
  using fact::Numerics;
  EXPECT_EQ(fact::baseline_numerics(Numerics::fp32), Numerics::fp32);
  EXPECT_EQ(fact::baseline_numerics(Numerics::x3tf32), Numerics::fp32);
  EXPECT_EQ(fact::baseline_numerics(Numerics::tf32), Numerics::tf32);
  EXPECT_EQ(fact::baseline_numerics(Numerics::bf16), Numerics::bf16);
  EXPECT_EQ(fact::baseline_numerics(Numerics::fp16), Numerics::fp16);
  for (const char* bad : {"fp8", "FP32"}) {
    try {
      fact::numerics_from_string(bad);
      FAIL() << bad << " was accepted";
    } catch (const fact::Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("3xtf32"), std::string::npos) << msg;  // lists the valid modes
    }
  }
}

TEST(CostModel, MiniGptPlanIsRankedByGain) {
  auto g = fixture("minigpt_block.json");
  auto plan = fact::discover::make_plan(g, rules(), ops(), sm90(), fact::Numerics::x3tf32);
  ASSERT_EQ(plan.entries.size(), 7u);
  std::string order;
  for (auto& e : plan.entries) order += e.match.rule + " (" + std::to_string(e.cost.gain_seconds() * 1e6) + " us)\n";
  SCOPED_TRACE(order);
  for (size_t i = 1; i < plan.entries.size(); ++i)
    EXPECT_GE(plan.entries[i - 1].cost.gain_seconds(), plan.entries[i].cost.gain_seconds()) << "entry " << i;

  auto rank = [&](const std::string& rule) {
    for (size_t i = 0; i < plan.entries.size(); ++i)
      if (plan.entries[i].match.rule == rule) return static_cast<int>(i);
    ADD_FAILURE() << rule << " not in the plan";
    return -1;
  };
  int gelu = rank("gemm_bias_gelu_tanh"), att = rank("sdpa_attention_manual"), ln = rank("layer_norm");
  ASSERT_GE(ln, 0);
  EXPECT_LT(gelu, ln);
  EXPECT_LT(att, ln);
  EXPECT_LT(std::max(gelu, att), 2) << "the two big fusions lead the plan";
  // The plan's estimate is the module's estimate minus the positive gains.
  double gains = 0;
  for (auto& e : plan.entries) gains += std::max(0.0, e.cost.gain_seconds());
  EXPECT_NEAR(plan.seconds_planned, plan.seconds_now - gains, 1e-12);
  EXPECT_LT(plan.seconds_planned, plan.seconds_now);
}

// SwiGLU's up projection stays PyTorch's GEMM (library_gemms 1): the pattern costs that GEMM as now, plus the
// gate GEMM with the fused epilogue, so its gain is the gate pattern's gain plus the multiply it removes, and
// the greedy overlap resolution prefers it over gemm_bias_silu on the gate alone.
TEST(CostModel, SwigluCountsItsUpProjectionAtTheLibraryRate) {
  auto g = fixture("llama3_block.json");
  for (const char* numerics : {"fp32", "tf32", "bf16"}) {
    SCOPED_TRACE(numerics);
    CostContext ctx{g, sm90(), fact::numerics_from_string(numerics)};
    auto swiglu = fact::discover::estimate_match(match_of(g, "gemm_swiglu", "mul_8"), ctx);
    auto silu = fact::discover::estimate_match(match_of(g, "gemm_bias_silu", "silu"), ctx);
    auto up = fact::discover::estimate_node(g.at("linear_5"), ctx);
    auto mul = fact::discover::estimate_node(g.at("mul_8"), ctx);
    EXPECT_NEAR(swiglu.seconds_fused, silu.seconds_fused + up.seconds, 1e-3 * swiglu.seconds_fused);
    EXPECT_NEAR(swiglu.gain_seconds(), silu.gain_seconds() + mul.seconds, 1e-3 * mul.seconds);
    EXPECT_GT(swiglu.gain_seconds(), silu.gain_seconds());
  }
}

// An add-norm writes the sum too when the graph reads it again: one more tensor of traffic than when the
// norm is its only reader, and still a gain over PyTorch's add kernel + norm kernel.
TEST(CostModel, ExtraOutputsCountAsWrittenBytes) {
  auto llama = fixture("llama3_block.json");
  CostContext ctx{llama, sm90(), fact::Numerics::bf16};
  Match exported = match_of(llama, "add_rms_norm", "mul_7");
  ASSERT_EQ(exported.extra_outputs.size(), 1u);
  Match private_sum = exported;
  private_sum.extra_outputs.clear();
  auto with_sum = fact::discover::estimate_match(exported, ctx);
  auto without = fact::discover::estimate_match(private_sum, ctx);
  const double sum_bytes = static_cast<double>(llama.at("add_3").out().bytes());
  EXPECT_DOUBLE_EQ(with_sum.bytes_fused - without.bytes_fused, sum_bytes);
  // x and residual read, y and the sum written, the [4096] weight read: 4 tensors of rows x cols.
  EXPECT_NEAR(with_sum.bytes_fused, 4 * sum_bytes, 4096 * 4 + 1);
  EXPECT_GT(with_sum.gain_seconds(), 0);
  // The fused add-norm gains more than the norm alone on the same rows (the add kernel's traffic is saved).
  Match norm_alone = match_of(llama, "rms_norm", "mul_7");
  EXPECT_GT(with_sum.gain_seconds(), fact::discover::estimate_match(norm_alone, ctx).gain_seconds());
}
