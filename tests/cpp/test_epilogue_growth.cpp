// Region growth: a GEMM match of the plan takes over the pointwise ops after it (data/ir/pointwise_ops.json)
// while one value leaves the region, and carries them as its epilogue tree (src/discover/epilogue_growth.h).
// Small graphs: x [64, 32] @ w [48, 32]^T + b [48] -> [64, 48], so rows (M = 64) and columns (N = 48) differ.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/arch_spec.h"
#include "core/error.h"
#include "discover/epilogue_growth.h"
#include "discover/pattern_registry.h"
#include "discover/plan.h"
#include "ir_test_graphs.h"
#include "realize/families/gemm/gemm_workload.h"

using fact::discover::Match;
using fact::discover::Plan;
using fact::test::GraphDoc;
using fact::test::Json;
using fact::test::ref_to;

namespace {

const fact::ir::OpTable& ops() { return fact::ir::OpTable::builtin(); }

Plan plan_of(GraphDoc& d) {
  static const auto registry = fact::discover::PatternRegistry::builtin();
  return fact::discover::make_plan(d.graph(), registry, ops(), fact::ArchSpec::builtin("sm90"), fact::Numerics::x3tf32);
}

// x, w, b and linear = x @ w^T + b (x of the given shape, last dim 32).
GraphDoc linear_graph(std::vector<int64_t> x_shape = {64, 32}, const std::string& dtype = "float32") {
  GraphDoc d;
  d.input("w", {48, 32}, dtype, "parameter").input("b", {48}, dtype, "parameter").input("x", x_shape, dtype);
  std::vector<int64_t> out = x_shape;
  out.back() = 48;
  d.op("linear", "aten.linear.default", {ref_to("x"), ref_to("w"), ref_to("b")}, out, dtype);
  return d;
}

const Match& gemm_entry(const Plan& p) {
  for (const auto& e : p.entries)
    if (std::find(e.match.nodes.begin(), e.match.nodes.end(), "linear") != e.match.nodes.end()) return e.match;
  for (const auto& e : p.entries)
    if (e.match.family == "gemm") return e.match;
  throw fact::Error("no GEMM entry in the plan");
}

std::string notes_of(const Plan& p) {
  std::string s;
  for (const auto& n : p.notes) s += n + "\n";
  return s;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const Json kBias = Json::parse(R"(["add", ["mul", "alpha", "acc"], {"row": "bias"}])");

}  // namespace

TEST(EpilogueGrowth, StartingTreesDropBetaC) {
  Match m;
  m.family = "gemm";
  m.kernel = Json::parse(R"({"family": "gemm", "epilogue": "linear_combination", "operands": {"a": "$a", "b": "$b", "bias": "$bias"}})");
  m.inputs = {{"$a", "x"}, {"$b", "w"}, {"$bias", "b"}};
  EXPECT_EQ(fact::discover::starting_epilogue_tree(m), kBias);
  m.inputs.erase("$bias");
  EXPECT_EQ(fact::discover::starting_epilogue_tree(m), Json::parse(R"(["mul", "alpha", "acc"])"));
  m.inputs["$bias"] = "b";
  m.kernel["activation"] = "gelu_tanh";
  EXPECT_EQ(fact::discover::starting_epilogue_tree(m), Json::array({"gelu_tanh", kBias}));
  m.kernel["activation"] = "silu_mul";
  EXPECT_TRUE(fact::discover::starting_epilogue_tree(m).is_null());
}

TEST(EpilogueGrowth, MulLeakyReluJoinTheGemm) {
  auto d = linear_graph();
  d.op("mul", "aten.mul.Tensor", {ref_to("linear"), 2.0}, {64, 48});
  d.op("leaky_relu", "aten.leaky_relu.default", {ref_to("mul"), 0.1}, {64, 48});
  d.output("leaky_relu");
  Plan p = plan_of(d);
  ASSERT_EQ(p.entries.size(), 1u);
  const Match& m = p.entries[0].match;
  EXPECT_EQ(m.rule, "gemm");
  EXPECT_EQ(m.nodes, (std::vector<std::string>{"linear", "mul", "leaky_relu"}));
  EXPECT_EQ(m.anchor, "leaky_relu");
  EXPECT_EQ(m.kernel["epilogue_tree"],
            Json::parse(R"(["leaky_relu", ["mul", ["add", ["mul", "alpha", "acc"], {"row": "bias"}], 2.0], {"negative_slope": 0.1}])"));
  EXPECT_EQ(m.kernel["epilogue_grown_over"], Json::parse(R"(["mul", "leaky_relu"])"));
  EXPECT_EQ(m.kernel["epilogue"], "linear_combination");  // the rule's fields stay
  EXPECT_EQ(m.kernel["operands"], Json::parse(R"({"a": "$a", "b": "$b", "bias": "$bias"})"));
  EXPECT_TRUE(p.uncovered_ops.empty());
  EXPECT_FALSE(has(notes_of(p), "stops at")) << notes_of(p);  // nothing followed
  std::string table = fact::discover::format_plan(p);
  EXPECT_TRUE(has(table, "covers linear, mul, leaky_relu (anchor leaky_relu; epilogue grown over mul, leaky_relu)")) << table;
}

// An activation spelled out in other ops (data/epilogues/activations.json "written_out") is folded into it: Mish as
// y * tanh(softplus(y)) (KernelBench's Conv2d_Activation_BatchNorm, with torch.multiply, an alias the tracer turns
// into mul), Swish as sigmoid(y) * y either way round; x * sigmoid(of another value) is no SiLU.
TEST(EpilogueGrowth, SpelledOutActivationsFoldIntoTheirOwn) {
  auto d = linear_graph();
  d.op("mul", "aten.mul.Tensor", {ref_to("linear"), 0.5}, {64, 48});
  d.op("softplus", "aten.softplus.default", {ref_to("mul")}, {64, 48});
  d.op("tanh", "aten.tanh.default", {ref_to("softplus")}, {64, 48});
  d.op("mish", "aten.mul.Tensor", {ref_to("tanh"), ref_to("mul")}, {64, 48});
  d.op("sigmoid", "aten.sigmoid.default", {ref_to("mish")}, {64, 48});
  d.op("swish", "aten.mul.Tensor", {ref_to("sigmoid"), ref_to("mish")}, {64, 48});
  d.op("sigmoid_1", "aten.sigmoid.default", {ref_to("mul")}, {64, 48});
  d.op("other", "aten.mul.Tensor", {ref_to("swish"), ref_to("sigmoid_1")}, {64, 48});
  d.output("other");
  Plan p = plan_of(d);
  const Match& m = gemm_entry(p);
  EXPECT_EQ(m.anchor, "other");
  const Json y = Json::array({"mul", kBias, 0.5});
  const Json swish = Json::array({"silu", Json::array({"mish", y})});
  EXPECT_EQ(m.kernel["epilogue_tree"], Json::array({"mul", swish, Json::array({"sigmoid", y})}));
}

TEST(EpilogueGrowth, ActivationDefaultsAndRuleActivationsGrowFurther) {
  auto d = linear_graph();
  d.op("relu", "aten.relu.default", {ref_to("linear")}, {64, 48});  // gemm_bias_relu takes linear + relu
  d.op("lr", "aten.leaky_relu.default", {ref_to("relu")}, {64, 48});
  d.op("g", "aten.gelu.default", {ref_to("lr")}, {64, 48}, "float32", {{"approximate", "tanh"}});
  d.op("h", "aten.hardtanh.default", {ref_to("g"), -2.0}, {64, 48});
  d.output("h");
  Plan p = plan_of(d);
  ASSERT_EQ(p.entries.size(), 1u);
  const Match& m = p.entries[0].match;
  EXPECT_EQ(m.rule, "gemm_bias_relu");
  EXPECT_EQ(m.kernel["epilogue_tree"],
            Json::array({"hardtanh",
                         Json::array({"gelu_tanh", Json::array({"leaky_relu", Json::array({"relu", kBias}),
                                                                Json::parse(R"({"negative_slope": 0.01})")})}),
                         Json::parse(R"({"min_val": -2.0, "max_val": 1.0})")}));
}

TEST(EpilogueGrowth, SharedIntermediateStopsGrowth) {
  // The GEMM's value feeds relu and a reduction: growing over relu would leave two values; nothing grows.
  auto d = linear_graph();
  d.op("relu", "aten.relu.default", {ref_to("linear")}, {64, 48});
  d.op("lse", "aten.logsumexp.default", {ref_to("linear"), Json::array({1}), true}, {64, 1});
  d.output("relu").output("lse");
  Plan p = plan_of(d);
  const Match& m = gemm_entry(p);
  EXPECT_FALSE(m.kernel.contains("epilogue_tree"));
  EXPECT_EQ(m.anchor, "linear");
  EXPECT_TRUE(has(notes_of(p), "gemm at linear: epilogue not grown; stops at lse (aten.logsumexp.default): a reduction (row-wise kernel)"))
      << notes_of(p);

  // An intermediate the graph also returns: growth keeps the last state with one value leaving.
  auto d2 = linear_graph();
  d2.op("mul", "aten.mul.Tensor", {ref_to("linear"), 3.0}, {64, 48});
  d2.op("relu", "aten.relu.default", {ref_to("mul")}, {64, 48});
  d2.output("relu").output("mul");
  Plan p2 = plan_of(d2);
  const Match& m2 = gemm_entry(p2);
  EXPECT_EQ(m2.anchor, "mul");
  EXPECT_EQ(m2.nodes, (std::vector<std::string>{"linear", "mul"}));
  EXPECT_EQ(m2.kernel["epilogue_tree"], Json::array({"mul", kBias, 3.0}));
  // relu is not the GEMM's: the generated row-wise pass takes it on its own.
  bool relu_generated = false;
  for (const auto& e : p2.entries)
    relu_generated |= e.match.rule == "rowwise_generated" && e.match.nodes == std::vector<std::string>{"relu"};
  EXPECT_TRUE(relu_generated);
  EXPECT_TRUE(p2.uncovered_ops.empty());
}

TEST(EpilogueGrowth, DiamondsRecompute) {
  // x * tanh(x) (no rule has it; written-out swish is gemm_bias_silu's), then x = x + x.
  auto d = linear_graph();
  d.op("sig", "aten.tanh.default", {ref_to("linear")}, {64, 48});
  d.op("mul", "aten.mul.Tensor", {ref_to("linear"), ref_to("sig")}, {64, 48});
  d.op("add", "aten.add.Tensor", {ref_to("mul"), ref_to("mul")}, {64, 48});
  d.output("add");
  Plan p = plan_of(d);
  const Match& m = gemm_entry(p);
  Json swish = Json::array({"mul", kBias, Json::array({"tanh", kBias})});
  EXPECT_EQ(m.kernel["epilogue_tree"], Json::array({"add", swish, swish}));
  EXPECT_EQ(m.anchor, "add");
  EXPECT_EQ(m.nodes.size(), 4u);
}

TEST(EpilogueGrowth, ExternalOperandsBecomeSlots) {
  auto d = linear_graph();
  d.input("scale", {48}, "float32", "parameter");   // row vector
  d.input("rows", {64, 1}, "float32");              // column vector
  d.input("s1", {1}, "float32", "parameter");       // one-element tensor: a run-time scalar
  d.input("res", {64, 48}, "float32");              // residual
  d.op("m1", "aten.mul.Tensor", {ref_to("linear"), ref_to("scale")}, {64, 48});
  d.op("a1", "aten.add.Tensor", {ref_to("m1"), ref_to("rows")}, {64, 48});
  d.op("s", "aten.sub.Tensor", {ref_to("a1"), ref_to("s1")}, {64, 48}, "float32", {{"alpha", 2.0}});
  d.op("r", "aten.add.Tensor", {ref_to("s"), ref_to("res")}, {64, 48});
  d.op("q", "aten.div.Tensor", {ref_to("r"), ref_to("scale")}, {64, 48});  // the same tensor: the same slot
  d.op("rs", "aten.rsub.Scalar", {ref_to("q"), 1.0}, {64, 48});
  d.op("c", "aten.clamp.default", {ref_to("rs"), -1.0, Json::object({{"float", "inf"}})}, {64, 48});
  d.output("c");
  Plan p = plan_of(d);
  const Match& m = gemm_entry(p);
  Json t = Json::array({"mul", kBias, {{"row", "vec0"}}});
  t = Json::array({"add", t, {{"col", "vec1"}}});
  t = Json::array({"sub", t, Json::array({"mul", {{"scalar", "vec2"}}, 2.0})});
  t = Json::array({"add", t, "residual"});
  t = Json::array({"div", t, {{"row", "vec0"}}});
  t = Json::array({"sub", 1.0, t});
  t = Json::array({"max", t, -1.0});
  EXPECT_EQ(m.kernel["epilogue_tree"], t);
  EXPECT_EQ(m.kernel["operands"], Json::parse(R"({"a": "$a", "b": "$b", "bias": "$bias", "vec0": "$vec0", "vec1": "$vec1",
                                                 "vec2": "$vec2", "residual": "$residual"})"));
  EXPECT_EQ(m.inputs.at("$vec0"), "scale");
  EXPECT_EQ(m.inputs.at("$vec1"), "rows");
  EXPECT_EQ(m.inputs.at("$vec2"), "s1");
  EXPECT_EQ(m.inputs.at("$residual"), "res");
  EXPECT_EQ(m.anchor, "c");

  // Fused traffic: x, w, b, the vectors (N, M, 1 elements) and the residual once, and the output once.
  const auto& cost = p.entries[0].cost;
  double floats = 64 * 32 + 48 * 32 + 48 + 48 + 64 + 1 + 64 * 48 + 64 * 48;
  EXPECT_DOUBLE_EQ(cost.bytes_fused, floats * 4);
  EXPECT_EQ(cost.kernels_now, 8);
}

TEST(EpilogueGrowth, StopsAtASecondResidualAndTooManyVectors) {
  auto d = linear_graph();
  d.input("r1", {64, 48}).input("r2", {64, 48});
  d.op("m", "aten.mul.Tensor", {ref_to("linear"), 0.5}, {64, 48});  // keeps gemm_bias_residual off
  d.op("a1", "aten.add.Tensor", {ref_to("m"), ref_to("r1")}, {64, 48});
  d.op("a2", "aten.add.Tensor", {ref_to("a1"), ref_to("r2")}, {64, 48});
  d.output("a2");
  Plan p = plan_of(d);
  const Match& m = gemm_entry(p);
  EXPECT_EQ(m.anchor, "a1");
  EXPECT_EQ(m.kernel["epilogue_tree"], Json::array({"add", Json::array({"mul", kBias, 0.5}), "residual"}));
  EXPECT_TRUE(has(notes_of(p), "stops at a2 (aten.add.Tensor): a second residual tensor")) << notes_of(p);

  auto d2 = linear_graph();
  std::string prev = "linear";
  for (int i = 0; i < 9; ++i) {
    std::string v = "v" + std::to_string(i), n = "m" + std::to_string(i);
    d2.input(v, {48}, "float32", "parameter");
    d2.op(n, "aten.mul.Tensor", {ref_to(prev), ref_to(v)}, {64, 48});
    prev = n;
  }
  d2.output(prev);
  Plan p2 = plan_of(d2);
  EXPECT_EQ(gemm_entry(p2).anchor, "m7");
  EXPECT_TRUE(has(notes_of(p2), "stops at m8 (aten.mul.Tensor): more than 8 vector operands")) << notes_of(p2);
}

TEST(EpilogueGrowth, BatchNormInEvalIsFourRowVectors) {
  auto d = linear_graph();
  for (const char* v : {"bn_w", "bn_b", "bn_rm", "bn_rv"}) d.input(v, {48}, "float32", "buffer");
  d.op("bn", "aten.batch_norm.default",
       {ref_to("linear"), ref_to("bn_w"), ref_to("bn_b"), ref_to("bn_rm"), ref_to("bn_rv"), false, 0.1, 1e-05, false},
       {64, 48});
  d.output("bn");
  Plan p = plan_of(d);
  const Match& m = gemm_entry(p);
  Json t = Json::array({"mul", Json::array({"sub", kBias, {{"row", "vec0"}}}),
                        Json::array({"rsqrt", Json::array({"add", {{"row", "vec1"}}, 1e-05})})});
  t = Json::array({"add", Json::array({"mul", t, {{"row", "vec2"}}}), {{"row", "vec3"}}});
  EXPECT_EQ(m.kernel["epilogue_tree"], t);
  EXPECT_EQ(m.inputs.at("$vec0"), "bn_rm");
  EXPECT_EQ(m.inputs.at("$vec1"), "bn_rv");
  EXPECT_EQ(m.inputs.at("$vec2"), "bn_w");
  EXPECT_EQ(m.inputs.at("$vec3"), "bn_b");

  // Training mode reads batch statistics: not pointwise.
  auto d2 = linear_graph();
  for (const char* v : {"bn_w", "bn_b", "bn_rm", "bn_rv"}) d2.input(v, {48}, "float32", "buffer");
  d2.op("bn", "aten.batch_norm.default",
        {ref_to("linear"), ref_to("bn_w"), ref_to("bn_b"), ref_to("bn_rm"), ref_to("bn_rv"), true, 0.1, 1e-05, false},
        {64, 48});
  d2.output("bn");
  Plan p2 = plan_of(d2);
  EXPECT_FALSE(gemm_entry(p2).kernel.contains("epilogue_tree"));
  EXPECT_TRUE(has(notes_of(p2), "stops at bn (aten.batch_norm.default): BatchNorm in training mode")) << notes_of(p2);

  // BatchNorm1d over a GEMM's [batch, 16, 48] output normalizes dim 1, not the GEMM's N: not its epilogue.
  auto d3 = linear_graph({4, 16, 32});
  for (const char* v : {"bn_w", "bn_b", "bn_rm", "bn_rv"}) d3.input(v, {16}, "float32", "buffer");
  d3.op("bn", "aten.batch_norm.default",
        {ref_to("linear"), ref_to("bn_w"), ref_to("bn_b"), ref_to("bn_rm"), ref_to("bn_rv"), false, 0.1, 1e-05, false},
        {4, 16, 48});
  d3.output("bn");
  Plan p3 = plan_of(d3);
  EXPECT_FALSE(gemm_entry(p3).kernel.contains("epilogue_tree"));
  EXPECT_TRUE(has(notes_of(p3), "runs along dim 1 of the output [4, 16, 48], which is not the kernel's N"))
      << notes_of(p3);
}

TEST(EpilogueGrowth, DropoutIsIdentityOnlyInEval) {
  auto d = linear_graph();
  d.op("drop", "aten.dropout.default", {ref_to("linear"), 0.5, false}, {64, 48});
  d.op("t", "aten.tanh.default", {ref_to("drop")}, {64, 48});
  d.output("t");
  Plan p = plan_of(d);
  const Match& m = gemm_entry(p);
  EXPECT_EQ(m.kernel["epilogue_tree"], Json::array({"tanh", kBias}));
  EXPECT_EQ(m.nodes, (std::vector<std::string>{"linear", "drop", "t"}));

  auto d2 = linear_graph();
  d2.op("drop", "aten.dropout.default", {ref_to("linear"), 0.5, true}, {64, 48});
  d2.output("drop");
  Plan p2 = plan_of(d2);
  EXPECT_FALSE(gemm_entry(p2).kernel.contains("epilogue_tree"));
  EXPECT_TRUE(has(notes_of(p2), "stops at drop (aten.dropout.default): its train is true (only false is the identity)"))
      << notes_of(p2);
}

TEST(EpilogueGrowth, StopsAtAReductionWithANote) {
  auto d = linear_graph();
  d.op("mul", "aten.mul.Tensor", {ref_to("linear"), 2.0}, {64, 48});
  d.op("s", "aten.sum.dim_IntList", {ref_to("mul"), Json::array({1})}, {64});
  d.output("s");
  Plan p = plan_of(d);
  EXPECT_EQ(gemm_entry(p).anchor, "mul");
  EXPECT_TRUE(has(notes_of(p), "gemm at linear: epilogue grown over mul (1 op); stops at s (aten.sum.dim_IntList): a reduction (row-wise kernel)"))
      << notes_of(p);

  // A view after the GEMM is where a projection ends: no note.
  auto d2 = linear_graph();
  d2.op("v", "aten.view.default", {ref_to("linear"), Json::array({64, 6, 8})}, {64, 6, 8});
  d2.output("v");
  Plan p2 = plan_of(d2);
  EXPECT_FALSE(has(notes_of(p2), "stops at")) << notes_of(p2);
}

TEST(EpilogueGrowth, ThreeDimensionalLinear) {
  auto d = linear_graph({2, 16, 32});
  d.input("scale", {48}, "float32", "parameter").input("rows", {2, 16, 1}).input("bad", {16, 1});
  d.op("m", "aten.mul.Tensor", {ref_to("linear"), ref_to("scale")}, {2, 16, 48});
  d.op("a", "aten.add.Tensor", {ref_to("m"), ref_to("rows")}, {2, 16, 48});
  d.op("b2", "aten.add.Tensor", {ref_to("a"), ref_to("bad")}, {2, 16, 48});  // broadcast over the batch dim
  d.output("b2");
  Plan p = plan_of(d);
  const Match& m = gemm_entry(p);
  EXPECT_EQ(m.kernel["epilogue_tree"], Json::array({"add", Json::array({"mul", kBias, {{"row", "vec0"}}}), {{"col", "vec1"}}}));
  EXPECT_EQ(m.anchor, "a");
  EXPECT_TRUE(has(notes_of(p), "stops at b2 (aten.add.Tensor): its operand 'bad' [16, 1] broadcasts over the output [2, 16, 48]"))
      << notes_of(p);
}

TEST(EpilogueGrowth, DtypeAndShapeChecks) {
  auto d = linear_graph();
  d.input("half", {48}, "float16", "parameter");
  d.op("m", "aten.mul.Tensor", {ref_to("linear"), ref_to("half")}, {64, 48});
  d.output("m");
  Plan p = plan_of(d);
  EXPECT_FALSE(gemm_entry(p).kernel.contains("epilogue_tree"));
  EXPECT_TRUE(has(notes_of(p), "stops at m (aten.mul.Tensor): its operand 'half' is float16, not the output's float32"))
      << notes_of(p);

  auto d2 = linear_graph();
  d2.input("big", {3, 64, 48});
  d2.op("a", "aten.mul.Tensor", {ref_to("linear"), ref_to("big")}, {3, 64, 48});  // add: gemm_bias_residual's
  d2.output("a");
  Plan p2 = plan_of(d2);
  EXPECT_FALSE(gemm_entry(p2).kernel.contains("epilogue_tree"));
  EXPECT_TRUE(has(notes_of(p2), "a shape-changing broadcast (output [3, 64, 48] vs the GEMM's [64, 48])")) << notes_of(p2);

  // An add that broadcasts the GEMM's value is no residual add either (gemm_bias_residual's numel check).
  auto d3 = linear_graph();
  d3.input("big", {3, 64, 48});
  d3.op("a", "aten.add.Tensor", {ref_to("linear"), ref_to("big")}, {3, 64, 48});
  d3.output("a");
  Plan p3 = plan_of(d3);
  EXPECT_EQ(gemm_entry(p3).rule, "gemm");
  EXPECT_EQ(gemm_entry(p3).anchor, "linear");
}

TEST(EpilogueGrowth, MatmulWithoutBiasAndResidualRuleLeftAlone) {
  GraphDoc d;
  d.input("x", {64, 32}).input("w", {32, 48}, "float32", "parameter");
  d.op("mm", "aten.mm.default", {ref_to("x"), ref_to("w")}, {64, 48});
  d.op("r", "aten.relu.default", {ref_to("mm")}, {64, 48});
  d.op("n", "aten.neg.default", {ref_to("r")}, {64, 48});
  d.output("n");
  Plan p = plan_of(d);
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].match.kernel["epilogue_tree"],
            Json::parse(R"(["neg", ["relu", ["mul", "alpha", "acc"]]])"));

  auto d2 = linear_graph();
  d2.input("res", {64, 48});
  d2.op("add", "aten.add.Tensor", {ref_to("linear"), ref_to("res")}, {64, 48});
  d2.op("r", "aten.relu.default", {ref_to("add")}, {64, 48});
  d2.output("r");
  Plan p2 = plan_of(d2);
  const Match& m2 = gemm_entry(p2);
  EXPECT_EQ(m2.rule, "gemm_bias_residual");
  EXPECT_FALSE(m2.kernel.contains("epilogue_tree"));
  EXPECT_EQ(m2.anchor, "add");
}

TEST(EpilogueGrowth, PlanJsonRoundTripAndRealizesAsTheGrownTree) {
  auto d = linear_graph();
  d.input("scale", {48}, "float32", "parameter");
  d.op("mul", "aten.mul.Tensor", {ref_to("linear"), ref_to("scale")}, {64, 48});
  d.op("t", "aten.tanh.default", {ref_to("mul")}, {64, 48});
  d.output("t");
  Plan p = plan_of(d);
  Json doc = fact::discover::to_json(p);
  Plan back = fact::discover::plan_from_json(doc, "plan.json", ops());
  ASSERT_EQ(back.entries.size(), 1u);
  const Match& a = p.entries[0].match;
  const Match& b = back.entries[0].match;
  EXPECT_EQ(b.kernel, a.kernel);
  EXPECT_EQ(b.nodes, a.nodes);
  EXPECT_EQ(b.inputs, a.inputs);
  EXPECT_EQ(b.anchor, "t");
  EXPECT_EQ(fact::discover::to_json(back)["patterns"], doc["patterns"]);

  // The GEMM family builds exactly the grown tree (never the rule's own epilogue), reading the scale as vec0.
  auto problem = fact::realize::gemm_problem_from_match(b, back.graph, fact::Numerics::x3tf32, fact::Arch::sm90);
  EXPECT_EQ(problem.epilogue.tree.to_json(), b.kernel["epilogue_tree"]);
  EXPECT_TRUE(has(problem.epilogue.key(), "tanh(")) << problem.epilogue.key();
  EXPECT_TRUE(has(problem.epilogue.key(), "row(vec0)")) << problem.epilogue.key();
}

TEST(EpilogueGrowth, TreeCapOf64NodesStopsRecomputedDiamonds) {
  // x = x + x doubles the tree: 5 -> 11 -> 23 -> 47 nodes; the fourth (95) stops.
  auto d = linear_graph();
  std::string prev = "linear";
  for (int i = 0; i < 4; ++i) {
    std::string n = "a" + std::to_string(i);
    d.op(n, "aten.add.Tensor", {ref_to(prev), ref_to(prev)}, {64, 48});
    prev = n;
  }
  d.output(prev);
  Plan p = plan_of(d);
  EXPECT_EQ(gemm_entry(p).rule, "gemm");  // not gemm_bias_residual with the GEMM's own value as residual
  EXPECT_EQ(gemm_entry(p).anchor, "a2");
  EXPECT_TRUE(has(notes_of(p), "stops at a3 (aten.add.Tensor): the epilogue tree would exceed 64 nodes")) << notes_of(p);
}

TEST(EpilogueGrowth, ParametersByKwargAndClampForms) {
  auto d = linear_graph();
  d.input("lo", {48}, "float32", "parameter");
  d.op("sp", "aten.softplus.default", {ref_to("linear")}, {64, 48}, "float32", {{"beta", 2}, {"threshold", 10}});
  d.op("e", "aten.elu.default", {ref_to("sp"), 0.5}, {64, 48});
  d.op("cm", "aten.clamp_min.default", {ref_to("e"), 0}, {64, 48});
  d.op("cx", "aten.clamp_max.default", {ref_to("cm"), 6}, {64, 48});
  d.op("ct", "aten.clamp.Tensor", {ref_to("cx"), ref_to("lo")}, {64, 48});  // a tensor bound is a vector
  d.op("ad", "aten.add.Scalar", {ref_to("ct"), 1.0}, {64, 48}, "float32", {{"alpha", 3}});
  d.op("g", "aten.gelu.default", {ref_to("ad"), "none"}, {64, 48});
  d.output("g");
  Plan p = plan_of(d);
  Json t = Json::array({"softplus", kBias, Json::parse(R"({"beta": 2.0, "threshold": 10.0})")});
  t = Json::array({"elu", t, Json::parse(R"({"alpha": 0.5, "scale": 1.0, "input_scale": 1.0})")});
  t = Json::array({"max", t, 0.0});
  t = Json::array({"min", t, 6.0});
  t = Json::array({"max", t, {{"row", "vec0"}}});
  t = Json::array({"add", t, Json::array({"mul", 1.0, 3.0})});
  t = Json::array({"gelu_erf", t});
  EXPECT_EQ(gemm_entry(p).kernel["epilogue_tree"], t);
  EXPECT_EQ(gemm_entry(p).inputs.at("$vec0"), "lo");
}

TEST(EpilogueGrowth, AnIdentityRegionGetsNoKernel) {
  // The GEMM's value is also returned, so growth stops; what follows is only dropout in eval: a kernel
  // could only copy what PyTorch returns as it is.
  auto d = linear_graph();
  d.op("drop", "aten.dropout.default", {ref_to("linear"), 0.1, false}, {64, 48});
  d.op("drop2", "aten.feature_dropout.default", {ref_to("drop"), 0.1, false}, {64, 48});
  d.output("drop2").output("linear");
  Plan p = plan_of(d);
  for (const auto& e : p.entries) EXPECT_NE(e.match.rule, "rowwise_generated") << e.match.anchor;
  EXPECT_TRUE(has(notes_of(p), "only passes its input on (aten.dropout.default, aten.feature_dropout.default)")) << notes_of(p);

  // One real op in the region makes it worth a kernel again.
  auto d2 = linear_graph();
  d2.op("drop", "aten.dropout.default", {ref_to("linear"), 0.1, false}, {64, 48});
  d2.op("relu", "aten.relu.default", {ref_to("drop")}, {64, 48});
  d2.output("relu").output("linear");
  bool generated = false;
  for (const auto& e : plan_of(d2).entries) generated |= e.match.rule == "rowwise_generated";
  EXPECT_TRUE(generated);
}

TEST(EpilogueGrowth, GrowsThroughAReshapeThatKeepsTheRows) {
  // Hugging Face's Conv1D: addmm on [64, 32] rows, viewed back to [4, 16, 48], then GELU's pieces and a
  // [4, 16, 1] per-row scale: the view passes the same values in the same order.
  GraphDoc d;
  d.input("x", {64, 32}).input("w", {32, 48}, "float32", "parameter").input("b", {48}, "float32", "parameter");
  d.input("s", {4, 16, 1});
  d.op("addmm", "aten.addmm.default", {ref_to("b"), ref_to("x"), ref_to("w")}, {64, 48});
  d.op("view", "aten.view.default", {ref_to("addmm"), Json::array({4, 16, 48})}, {4, 16, 48});
  d.op("mul", "aten.mul.Tensor", {ref_to("view"), ref_to("s")}, {4, 16, 48});
  d.op("t", "aten.tanh.default", {ref_to("mul")}, {4, 16, 48});
  d.output("t");
  Plan p = plan_of(d);
  const Match& m = gemm_entry(p);
  EXPECT_EQ(m.anchor, "t");
  EXPECT_EQ(m.nodes, (std::vector<std::string>{"addmm", "view", "mul", "t"}));
  ASSERT_TRUE(m.kernel.contains("epilogue_tree")) << m.kernel.dump();
  EXPECT_EQ(m.kernel["epilogue_tree"], Json::array({"tanh", Json::array({"mul", kBias, Json{{"col", "vec0"}}})}));
  EXPECT_EQ(m.inputs.at("$vec0"), "s");

  // A view that regroups the columns (rows of 48 become rows of 8) is no reshape of the GEMM's rows: growth stops.
  GraphDoc d2;
  d2.input("x", {64, 32}).input("w", {32, 48}, "float32", "parameter").input("b", {48}, "float32", "parameter");
  d2.op("addmm", "aten.addmm.default", {ref_to("b"), ref_to("x"), ref_to("w")}, {64, 48});
  d2.op("view", "aten.view.default", {ref_to("addmm"), Json::array({64, 6, 8})}, {64, 6, 8});
  d2.op("t", "aten.tanh.default", {ref_to("view")}, {64, 6, 8});
  d2.output("t");
  const Match& m2 = gemm_entry(plan_of(d2));
  EXPECT_EQ(m2.anchor, "addmm");
  EXPECT_FALSE(m2.kernel.contains("epilogue_grown_over"));

  // A view with nothing pointwise after it is not taken: the GEMM ends at its own value.
  GraphDoc d3;
  d3.input("x", {64, 32}).input("w", {32, 48}, "float32", "parameter").input("b", {48}, "float32", "parameter");
  d3.op("addmm", "aten.addmm.default", {ref_to("b"), ref_to("x"), ref_to("w")}, {64, 48});
  d3.op("view", "aten.view.default", {ref_to("addmm"), Json::array({4, 16, 48})}, {4, 16, 48});
  d3.output("view");
  const Match& m3 = gemm_entry(plan_of(d3));
  EXPECT_EQ(m3.anchor, "addmm");
}
