// The built-in rules on graphs the tracer wrote from bench/problems (fixtures in data/ir/).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "core/arch_spec.h"
#include "discover/matcher.h"
#include "discover/pattern_registry.h"
#include "ir/ir_io.h"

using fact::discover::Match;

namespace {

std::vector<Match> resolved(const std::string& fixture, const std::string& arch = "sm90") {
  auto g = fact::ir::load_graph(std::string(FACT_TEST_DATA) + "/ir/" + fixture, fact::ir::OpTable::builtin());
  auto all = fact::discover::find_all_matches(g, fact::discover::PatternRegistry::builtin(), fact::ir::OpTable::builtin(),
                                              fact::ArchSpec::builtin(arch));
  return fact::discover::resolve_overlaps(all, [](const Match& m) { return static_cast<double>(m.nodes.size()); });
}

std::string describe(const std::vector<Match>& ms) {
  std::ostringstream os;
  for (const auto& m : ms) {
    os << m.rule << " @" << m.anchor << " [";
    for (const auto& n : m.nodes) os << n << ' ';
    os << "]\n";
  }
  return os.str();
}

const Match* by_anchor(const std::vector<Match>& ms, const std::string& anchor) {
  for (const auto& m : ms)
    if (m.anchor == anchor) return &m;
  return nullptr;
}

size_t count_rule(const std::vector<Match>& ms, const std::string& rule) {
  return std::count_if(ms.begin(), ms.end(), [&](const Match& m) { return m.rule == rule; });
}

}  // namespace

TEST(RulesProblems, MiniGptBlockOnSm90) {
  auto ms = resolved("minigpt_block.json");
  SCOPED_TRACE(describe(ms));
  ASSERT_EQ(count_rule(ms, "sdpa_attention_manual"), 1u);
  const Match* att = by_anchor(ms, "matmul_1");
  ASSERT_NE(att, nullptr);
  EXPECT_EQ(att->rule, "sdpa_attention_manual");
  EXPECT_EQ(att->nodes, (std::vector<std::string>{"transpose_3", "matmul", "mul", "masked_fill", "softmax", "dropout", "matmul_1"}));
  EXPECT_EQ(att->inputs.at("$q"), "transpose");
  EXPECT_EQ(att->inputs.at("$k"), "transpose_1");
  EXPECT_EQ(att->inputs.at("$v"), "transpose_2");
  EXPECT_EQ(att->inputs.at("$mask"), "eq");
  EXPECT_EQ(att->attrs.at("causal"), true);
  EXPECT_NEAR(att->attrs.at("scale").get<double>(), 0.10206207261596577, 1e-12);
  EXPECT_EQ(att->dims.at("batch"), 128);
  EXPECT_EQ(att->dims.at("heads"), 8);
  EXPECT_EQ(att->dims.at("seq_q"), 512);
  EXPECT_EQ(att->dims.at("seq_k"), 512);
  EXPECT_EQ(att->dims.at("head_dim"), 96);
  EXPECT_EQ(att->dims.at("causal"), 1);
  EXPECT_EQ(att->family, "attention");
  EXPECT_EQ(att->examples, (std::vector<std::string>{"cutlass:88_hopper_fmha", "cutlass:41_fused_multi_head_attention"}));

  ASSERT_EQ(count_rule(ms, "gemm_bias_gelu_tanh"), 1u);
  const Match* gelu = by_anchor(ms, "mul_4");
  ASSERT_NE(gelu, nullptr);
  EXPECT_EQ(gelu->rule, "gemm_bias_gelu_tanh");
  EXPECT_EQ(gelu->nodes, (std::vector<std::string>{"linear_2", "mul_1", "pow_1", "mul_2", "add_1", "mul_3", "tanh", "add_2", "mul_4"}));
  EXPECT_EQ(gelu->dims.at("M"), 128 * 512);
  EXPECT_EQ(gelu->dims.at("N"), 3072);
  EXPECT_EQ(gelu->dims.at("K"), 768);
  EXPECT_EQ(gelu->inputs.at("$bias"), "p_mlp_c_fc_bias");
  EXPECT_EQ(gelu->kernel.at("activation"), "gelu_tanh");

  ASSERT_EQ(count_rule(ms, "gemm_bias_residual"), 2u);
  const Match* proj = by_anchor(ms, "add");
  ASSERT_NE(proj, nullptr);
  EXPECT_EQ(proj->rule, "gemm_bias_residual");
  EXPECT_EQ(proj->nodes, (std::vector<std::string>{"linear_1", "dropout_1", "add"}));
  EXPECT_EQ(proj->inputs.at("$residual"), "x");
  const Match* mlp = by_anchor(ms, "add_3");
  ASSERT_NE(mlp, nullptr);
  EXPECT_EQ(mlp->rule, "gemm_bias_residual");
  EXPECT_EQ(mlp->nodes, (std::vector<std::string>{"linear_3", "dropout_2", "add_3"}));
  EXPECT_EQ(mlp->dims.at("K"), 3072);

  EXPECT_EQ(count_rule(ms, "layer_norm"), 2u);
  ASSERT_NE(by_anchor(ms, "layer_norm_1"), nullptr);
  EXPECT_EQ(by_anchor(ms, "layer_norm_1")->dims.at("rows"), 128 * 512);
  const Match* qkv = by_anchor(ms, "linear");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->rule, "gemm");
  EXPECT_EQ(qkv->dims.at("N"), 2304);
  EXPECT_EQ(ms.size(), 7u);
}

TEST(RulesProblems, MiniGptExamplesFollowTheArch) {
  auto ms = resolved("minigpt_block.json", "sm80");
  const Match* att = by_anchor(ms, "matmul_1");
  ASSERT_NE(att, nullptr);
  EXPECT_EQ(att->examples, (std::vector<std::string>{"cutlass:41_fused_multi_head_attention"}));
}

TEST(RulesProblems, Level1Matmuls) {
  auto square = resolved("square_matmul_4096.json");
  ASSERT_EQ(square.size(), 1u);
  EXPECT_EQ(square[0].rule, "gemm");
  EXPECT_EQ(square[0].dims.at("M"), 4096);
  auto standard = resolved("standard_matmul.json");
  ASSERT_EQ(standard.size(), 1u);
  EXPECT_EQ(standard[0].rule, "gemm");
  auto batched = resolved("batched_matmul.json");
  ASSERT_EQ(batched.size(), 1u);
  EXPECT_EQ(batched[0].rule, "batched_gemm");
  EXPECT_GT(batched[0].dims.at("batch"), 1);
  auto large_k = resolved("large_k_matmul.json");
  ASSERT_EQ(large_k.size(), 1u);
  EXPECT_EQ(large_k[0].rule, "large_k_gemm");
  EXPECT_EQ(large_k[0].dims.at("K"), 131072);
  EXPECT_EQ(large_k[0].kernel.at("mode"), "split_k");
}

TEST(RulesProblems, Llama3Block) {
  auto ms = resolved("llama3_block.json");
  SCOPED_TRACE(describe(ms));
  // The input norm alone; the post-attention norm takes the residual add before it, whose sum the block's
  // second residual add reads again (an extra output). By nodes covered it beats o_proj's GEMM + residual.
  EXPECT_EQ(count_rule(ms, "rms_norm"), 1u);
  ASSERT_NE(by_anchor(ms, "mul_1"), nullptr);
  EXPECT_EQ(by_anchor(ms, "mul_1")->rule, "rms_norm");
  const Match* add_rms = by_anchor(ms, "mul_7");
  ASSERT_NE(add_rms, nullptr);
  EXPECT_EQ(add_rms->rule, "add_rms_norm");
  EXPECT_EQ(add_rms->nodes, (std::vector<std::string>{"add_3", "pow_2", "mean_1", "add_4", "rsqrt_1", "mul_6", "mul_7"}));
  EXPECT_EQ(add_rms->extra_outputs, (std::map<std::string, std::string>{{"sum", "add_3"}}));
  EXPECT_EQ(add_rms->inputs.at("$weight"), "p_post_attn_norm_weight");
  EXPECT_EQ(add_rms->dims.at("rows"), 2 * 2048);
  ASSERT_NE(by_anchor(ms, "linear_3"), nullptr);
  EXPECT_EQ(by_anchor(ms, "linear_3")->rule, "gemm");
  const Match* att = by_anchor(ms, "scaled_dot_product_attention");
  ASSERT_NE(att, nullptr);
  EXPECT_EQ(att->rule, "sdpa_attention");
  EXPECT_EQ(att->inputs.at("$k"), "add_2");  // looked through unsqueeze/expand/reshape (repeat_kv)
  EXPECT_EQ(att->dims.at("heads"), 32);
  EXPECT_EQ(att->dims.at("heads_kv"), 8);
  EXPECT_EQ(att->dims.at("causal"), 1);
  EXPECT_EQ(att->nodes.size(), 7u);
  // SwiGLU, bias-free, silu(gate) * up: one pattern over both GEMMs (it beats gemm_bias_silu on the gate).
  EXPECT_EQ(by_anchor(ms, "silu"), nullptr);
  EXPECT_EQ(count_rule(ms, "gemm_bias_silu"), 0u);
  const Match* swiglu = by_anchor(ms, "mul_8");
  ASSERT_NE(swiglu, nullptr);
  EXPECT_EQ(swiglu->rule, "gemm_swiglu");
  EXPECT_EQ(swiglu->nodes, (std::vector<std::string>{"linear_4", "silu", "linear_5", "mul_8"}));
  EXPECT_EQ(swiglu->inputs.at("$a"), "mul_7");
  EXPECT_EQ(swiglu->inputs.at("$wg"), "p_mlp_gate_proj_weight");
  EXPECT_EQ(swiglu->inputs.at("$wu"), "p_mlp_up_proj_weight");
  EXPECT_EQ(swiglu->inputs.count("$bg"), 0u);
  EXPECT_EQ(swiglu->dims.at("M"), 2 * 2048);
  EXPECT_EQ(swiglu->dims.at("N"), 14336);
  EXPECT_EQ(swiglu->dims.at("K"), 4096);
  EXPECT_EQ(swiglu->dims.at("library_gemms"), 1);
  EXPECT_EQ(swiglu->kernel.at("epilogue"), "bias_silu_mul");
  ASSERT_NE(by_anchor(ms, "add_5"), nullptr);
  EXPECT_EQ(by_anchor(ms, "add_5")->rule, "gemm_bias_residual");
}

// SwiGLU with biases, SiLU written as g * sigmoid(g) and the product as up * act (bench/problems/level2).
TEST(RulesProblems, SwigluMlpBiasedWrittenOutSilu) {
  auto ms = resolved("swiglu_mlp.json");
  SCOPED_TRACE(describe(ms));
  const Match* swiglu = by_anchor(ms, "mul_1");
  ASSERT_NE(swiglu, nullptr);
  EXPECT_EQ(swiglu->rule, "gemm_swiglu");
  EXPECT_EQ(swiglu->nodes, (std::vector<std::string>{"linear", "linear_1", "sigmoid", "mul", "mul_1"}));
  EXPECT_EQ(swiglu->inputs.at("$bg"), "p_gate_proj_bias");
  EXPECT_EQ(swiglu->inputs.at("$bu"), "p_up_proj_bias");
  EXPECT_EQ(swiglu->inputs.at("$a"), "x");
  EXPECT_EQ(swiglu->dims.at("M"), 4 * 2048);
  EXPECT_EQ(swiglu->dims.at("N"), 5632);
  EXPECT_EQ(swiglu->dims.at("K"), 2048);
  EXPECT_EQ(swiglu->attrs.at("b_layout"), "nk");
  const Match* down = by_anchor(ms, "linear_2");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->rule, "gemm");
  EXPECT_EQ(ms.size(), 2u);
  // On sm80 the same pattern matches (the 2.x broadcast epilogue realizes it).
  auto sm80 = resolved("swiglu_mlp.json", "sm80");
  ASSERT_NE(by_anchor(sm80, "mul_1"), nullptr);
  EXPECT_EQ(by_anchor(sm80, "mul_1")->rule, "gemm_swiglu");
}

namespace {

std::vector<Match> all_of(const std::string& fixture) {
  auto g = fact::ir::load_graph(std::string(FACT_TEST_DATA) + "/ir/" + fixture, fact::ir::OpTable::builtin());
  return fact::discover::find_all_matches(g, fact::discover::PatternRegistry::builtin(), fact::ir::OpTable::builtin(),
                                          fact::ArchSpec::builtin("sm90"));
}

std::string add_norm_sites(const std::vector<Match>& ms) {
  std::string s;
  for (const auto& m : ms)
    if (m.rule == "add_layer_norm" || m.rule == "add_rms_norm")
      s += m.rule + "@" + m.anchor + (m.extra_outputs.empty() ? "" : "+" + m.extra_outputs.at("sum")) + " ";
  return s;
}

}  // namespace

// Every residual add that feeds a norm in the problem set is found by the add-norm rules (before overlap
// resolution: where a GEMM + residual epilogue claims the same add, the cost model decides), with the sum
// exported exactly where the block reads it again. level2's two problems: the norm is the sum's only reader.
TEST(RulesProblems, AddNormSitesInTheProblemSet) {
  EXPECT_EQ(add_norm_sites(all_of("add_layer_norm.json")), "add_layer_norm@layer_norm ");
  EXPECT_EQ(add_norm_sites(all_of("add_rms_norm.json")), "add_rms_norm@mul_1 ");
  // Pre-norm blocks: the second norm reads x + attn(...), and so does the closing residual add.
  EXPECT_EQ(add_norm_sites(all_of("minigpt_block.json")), "add_layer_norm@layer_norm_1+add ");
  EXPECT_EQ(add_norm_sites(all_of("vit_block.json")), "add_layer_norm@layer_norm_1+add ");
  EXPECT_EQ(add_norm_sites(all_of("llama3_block.json")), "add_rms_norm@mul_7+add_3 ");
  // Post-norm encoder: both norms read a residual sum that nothing else reads.
  EXPECT_EQ(add_norm_sites(all_of("encoder_block_postnorm.json")), "add_layer_norm@layer_norm add_layer_norm@layer_norm_1 ");
  // The first norm of a pre-norm block reads the block input: the plain rule, no add.
  auto minigpt = resolved("minigpt_block.json");
  ASSERT_NE(by_anchor(minigpt, "layer_norm"), nullptr);
  EXPECT_EQ(by_anchor(minigpt, "layer_norm")->rule, "layer_norm");

  auto level2 = resolved("add_rms_norm.json");
  ASSERT_EQ(level2.size(), 1u);
  EXPECT_EQ(level2[0].rule, "add_rms_norm");
  EXPECT_EQ(level2[0].nodes.size(), 7u);
  EXPECT_EQ(level2[0].inputs.at("$weight"), "p_weight");
  EXPECT_DOUBLE_EQ(level2[0].attrs.at("eps").get<double>(), 1e-6);
}
