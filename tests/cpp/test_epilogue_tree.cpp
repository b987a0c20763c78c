// Epilogue trees: the compact JSON form both ways, the predefined trees of data/epilogues/named.json and their
// names, canonical text, the sm90 visitor tree rendered from trees, and which trees sm80's 2.x epilogues take.
#include <gtest/gtest.h>

#include "core/error.h"
#include "realize/families/gemm/epilogue_activations.h"
#include "realize/families/gemm/epilogue_scalar.h"
#include "realize/families/gemm/epilogue_sm80.h"
#include "realize/families/gemm/epilogue_sm90_evt.h"
#include "realize/families/gemm/gemm_config_space.h"
#include "realize/families/gemm/gemm_epilogue.h"

using namespace fact;
using namespace fact::realize;
using nlohmann::json;

namespace {

bool contains(const std::string& s, const std::string& piece) { return s.find(piece) != std::string::npos; }

EpilogueTree tree(const char* text) { return EpilogueTree::from_json(json::parse(text)); }

}  // namespace

TEST(EpilogueTree, CompactJsonRoundTripsEveryNodeKind) {
  const char* text = R"(["add", ["mul", ["relu", ["max", ["add", ["mul", "alpha", "acc"], {"row": "bias"}],
                         ["div", {"col": "bias"}, -2.5]]], 0.5], ["min", ["sub", "residual", "beta"], "C"]])";
  EpilogueTree t = tree(text);
  EXPECT_EQ(t.to_json(), json::parse(text));
  EXPECT_EQ(EpilogueTree::from_json(t.to_json()), t);
  EXPECT_EQ(t.text(),
            "add(mul(relu(max(add(mul(alpha,acc),row(bias)),div(col(bias),-2.5))),0.5),min(sub(residual,beta),C))");
  EXPECT_EQ(t.activations(), std::vector<std::string>{"relu"});
  EXPECT_TRUE(t.reads_source("residual"));
  EXPECT_TRUE(t.reads_vector());
}

TEST(EpilogueTree, BadNodesAreErrorsNamingThem) {
  for (const char* bad : {R"("bias")", R"(["tanh_fast", "acc"])", R"(["add", "acc"])", R"({"row": "scale"})",
                          R"(["relu", "acc", "acc"])", R"({"diag": "bias"})", "true"}) {
    try {
      tree(bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const Error& e) {
      SCOPED_TRACE(e.what());
      EXPECT_FALSE(std::string(e.what()).empty());
    }
  }
  try {
    tree(R"(["tanh_fast", "acc"])");
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "activation 'tanh_fast' is not in data/epilogues/activations.json")) << e.what();
  }
}

TEST(EpilogueTree, PredefinedNamesAreTreesAndTreesFindTheirNames) {
  const std::vector<std::string> names = {"none", "bias", "bias_relu", "bias_silu", "bias_gelu_erf", "bias_gelu_tanh",
                                          "bias_residual", "bias_silu_mul"};
  EXPECT_EQ(Epilogue::names(), names);
  for (const auto& n : names) {
    Epilogue e = Epilogue::named(n);
    EXPECT_EQ(e.to_json(), json(n));  // records keep storing the name: config ids and workload keys unchanged
    EXPECT_EQ(Epilogue::of(e.tree).name, n);
    EXPECT_EQ(Epilogue::from_json(e.tree.to_json()).name, n);
  }
  EXPECT_EQ(Epilogue::named("bias_gelu_tanh").tree.text(),
            "gelu_tanh(add(mul(beta,C),add(mul(alpha,acc),row(bias))))");
  EXPECT_EQ(Epilogue::named("bias_silu_mul").tree.text(), "mul(silu(add(mul(alpha,acc),row(bias))),residual)");
  EXPECT_FALSE(has_bias(Epilogue::named("none")));
  EXPECT_TRUE(has_bias(Epilogue::named("bias")));
  EXPECT_TRUE(has_residual(Epilogue::named("bias_residual")));
  EXPECT_FALSE(has_residual(Epilogue::named("bias_relu")));
  EXPECT_THROW(Epilogue::named("bias_tanh"), Error);

  // An unnamed tree is stored as its tree and keyed by its text.
  Epilogue custom = Epilogue::from_json(json::parse(R"(["relu", ["mul", 0.5, "acc"]])"));
  EXPECT_EQ(custom.name, "");
  EXPECT_EQ(custom.key(), "relu(mul(0.5,acc))");
  EXPECT_EQ(custom.to_json(), json::parse(R"(["relu", ["mul", 0.5, "acc"]])"));
  GemmProblem p = GemmProblem::packed(64, 64, 64, 1, Numerics::bf16, Arch::sm90, true, custom);
  EXPECT_TRUE(contains(p.workload_key(), "_relu(mul(0.5,acc))_sm90"));
  EXPECT_EQ(GemmProblem::from_json(p.to_json()).epilogue, custom);
}

TEST(EpilogueTree, ActivationTableGivesEachSpelling) {
  const auto& gelu = activation_entry("gelu_tanh");
  EXPECT_EQ(gelu.cutlass, "cutlass::epilogue::thread::GELU_taylor");
  EXPECT_EQ(gelu.cutlass2_output_op, "");
  EXPECT_EQ(gelu.fp32_accurate, "fact_act::GeluTanh");
  EXPECT_EQ(gelu.torch, json::parse(R"({"aten": "gelu", "kwargs": {"approximate": "tanh"}})"));
  EXPECT_EQ(activation_entry("relu").fp32_accurate, "");
  EXPECT_EQ(activation_table_json({"relu"}).size(), 1u);
}

TEST(EpilogueTree, Sm90VisitorTreeFollowsTheTreeWithFusedMultiplyAdds) {
  // CUTLASS's LinCombPerColBiasEltAct<GELU_taylor>, node for node.
  std::string t = sm90_evt_type(Epilogue::named("bias_gelu_tanh").tree, false);
  EXPECT_EQ(t,
            "fusion::Sm90EVT<fusion::Sm90Compute<cutlass::epilogue::thread::GELU_taylor, ElementD, ElementCompute, kRound>,"
            "  // gelu_tanh(add(mul(beta,C),add(mul(alpha,acc),row(bias))))\n"
            "  fusion::Sm90EVT<fusion::Sm90Compute<cutlass::homogeneous_multiply_add, ElementCompute, ElementCompute, "
            "kRound>,  // add(mul(beta,C),add(mul(alpha,acc),row(bias)))\n"
            "    fusion::Sm90ScalarBroadcast<ElementCompute, ScalarStride>,\n"
            "    fusion::Sm90SrcFetch<ElementC>,\n"
            "    fusion::Sm90EVT<fusion::Sm90Compute<cutlass::homogeneous_multiply_add, ElementCompute, ElementCompute, "
            "kRound>,  // add(mul(alpha,acc),row(bias))\n"
            "      fusion::Sm90ScalarBroadcast<ElementCompute, ScalarStride>,\n"
            "      fusion::Sm90AccFetch,\n"
            "      fusion::Sm90RowBroadcast<0, TileShape, ElementBias, ElementCompute, RowStride, kAlignmentBias>>>>");
  EXPECT_TRUE(contains(sm90_evt_type(Epilogue::named("bias_gelu_tanh").tree, true), "Sm90Compute<fact_act::GeluTanh,"));
  // A column broadcast, a constant and max: every node kind renders, the constant's value in the arguments.
  EpilogueTree custom = tree(R"(["max", ["mul", -0.25, {"col": "bias"}], ["sub", "acc", "residual"]])");
  std::string type = sm90_evt_type(custom, false);
  EXPECT_TRUE(contains(type, "fusion::Sm90Compute<cutlass::maximum, ElementD, ElementCompute, kRound>"));
  EXPECT_TRUE(contains(type, "fusion::Sm90Compute<cutlass::multiplies, ElementCompute, ElementCompute, kRound>"));
  EXPECT_TRUE(contains(type, "fusion::Sm90Compute<cutlass::minus, ElementCompute, ElementCompute, kRound>"));
  EXPECT_TRUE(contains(type, "fusion::Sm90ColBroadcast<0, TileShape, ElementBias, ElementCompute, ColStride, kAlignmentBias>"));
  std::string args = sm90_evt_arguments(custom);
  EXPECT_TRUE(contains(args, "{ {ElementCompute(-0.25)}, {nullptr}, {ScalarStride{}} }  /* -0.25 */"));
  EXPECT_TRUE(contains(args, "{ static_cast<const ElementBias*>(a.bias), ElementBias(0), ColStride{} }"));
  // Trees sm90 cannot run are refused with the reason.
  EXPECT_TRUE(sm90_evt_rejection(tree(R"("acc")")).has_value());
  EXPECT_TRUE(sm90_evt_rejection(tree(R"(["add", "C", "residual"])")).has_value());
  EXPECT_TRUE(sm90_evt_rejection(tree(R"(["add", {"row": "bias"}, {"col": "bias"}])")).has_value());
}

TEST(EpilogueTree, DivisionByAPowerOfTwoIsAMultiplyInTheVisitorTree) {
  // x / 2 and x / -0.25 are exact multiplies; x / 3 and x / vec0 stay divisions (1 / 3 rounds).
  EpilogueTree t = tree(R"(["add", ["div", ["div", "acc", 2.0], -0.25], ["div", ["div", "acc", 3.0], {"row": "vec0"}]])");
  EXPECT_EQ(t.with_exact_reciprocals().text(), tree(R"(["add", ["mul", ["mul", "acc", 0.5], -4.0],
                                                            ["div", ["div", "acc", 3.0], {"row": "vec0"}]])").text());
  std::string type = sm90_evt_type(t, true), args = sm90_evt_arguments(t);
  EXPECT_TRUE(contains(type, "// add(mul(mul(acc,0.5),-4),div(div(acc,3),row(vec0)))"));
  EXPECT_TRUE(contains(args, "{ {ElementCompute(0.5)}, {nullptr}, {ScalarStride{}} }"));
  EXPECT_TRUE(contains(args, "{ {ElementCompute(3)}, {nullptr}, {ScalarStride{}} }"));
  // The tree itself (its text, the tuning key) is unchanged.
  EXPECT_EQ(t.text(), "add(div(div(acc,2),-0.25),div(div(acc,3),row(vec0)))");
}

TEST(EpilogueTree, Sm80TakesTheLinearCombinationAndBroadcastFormsAndRefusesOthers) {
  EXPECT_EQ(sm80_epilogue(Epilogue::named("bias_relu").tree, false).output_op,
            "cutlass::epilogue::thread::LinearCombinationRelu");
  EXPECT_EQ(sm80_epilogue(Epilogue::named("bias_gelu_tanh").tree, false).output_op,
            "LinearCombinationWith<cutlass::epilogue::thread::GELU_taylor>::Op");
  EXPECT_EQ(sm80_epilogue(Epilogue::named("bias_silu").tree, true).output_op, "LinearCombinationWith<fact_act::Silu>::Op");
  auto swiglu = sm80_epilogue(Epilogue::named("bias_silu_mul").tree, false);
  EXPECT_TRUE(swiglu.broadcast);
  EXPECT_EQ(swiglu.activation_op, "cutlass::epilogue::thread::SiLu");
  EXPECT_EQ(swiglu.combine_op, "cutlass::multiplies");
  // A residual added after a GELU is a broadcast form too, though no predefined epilogue names it.
  auto gelu_residual = sm80_epilogue(tree(R"(["add", ["gelu_erf", ["add", ["mul", "alpha", "acc"], {"row": "bias"}]],
                                                      "residual"])"), false);
  EXPECT_TRUE(gelu_residual.broadcast);
  EXPECT_EQ(gelu_residual.activation_op, "cutlass::epilogue::thread::GELU");

  EpilogueTree scaled = tree(R"(["add", ["mul", ["relu", ["add", ["mul", "alpha", "acc"], {"row": "bias"}]], 0.5],
                                   "residual"])");
  auto why = sm80_epilogue_rejection(scaled);
  ASSERT_TRUE(why.has_value());
  EXPECT_TRUE(contains(*why, "has no CUTLASS 2.x form in FACT yet")) << *why;
  EXPECT_THROW(sm80_epilogue(scaled, false), Error);
  // The config space then has no sm80 candidate: the pattern stays PyTorch's there; sm90 has candidates.
  auto p80 = GemmProblem::packed(1024, 1024, 1024, 1, Numerics::tf32, Arch::sm80, true, Epilogue::of(scaled));
  try {
    enumerate_gemm_configs(p80, {.top_n = 4});
    ADD_FAILURE() << "an sm80 config was offered for a tree sm80 cannot express";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "has no CUTLASS 2.x form in FACT yet")) << e.what();
  }
  auto p90 = GemmProblem::packed(1024, 1024, 1024, 1, Numerics::bf16, Arch::sm90, true, Epilogue::of(scaled));
  bool sm90_candidate = false;
  for (const auto& rc : enumerate_gemm_configs(p90, {.top_n = 8}).ranked)
    sm90_candidate |= rc.config.api == KernelApi::cutlass3_collective;
  EXPECT_TRUE(sm90_candidate);
}

// Kernels that compute element by element (the conv family's direct kernel) get the tree as one float expression
// over locals they define, every activation from the table's expr; trees reading C or column vectors have none.
TEST(EpilogueTree, ScalarExpressionFollowsTheTreeAndNamesWhatHasNoScalarForm) {
  EpilogueTree t = EpilogueTree::from_json(json::parse(
      R"(["add", ["leaky_relu", ["add", ["mul", "alpha", "acc"], {"row": "bias"}], {"negative_slope": 0.2}],
          ["mul", "residual", {"scalar": "vec1"}]])"));
  std::string name = activation_functor_name(t.children[0]);
  EXPECT_EQ(scalar_epilogue_expression(t), "(" + name + "Scalar{}(((alpha * acc) + bias)) + (residual * vec1))");
  std::string functors = activation_scalar_functors(t, /*all=*/true);
  EXPECT_NE(functors.find("struct " + name + "Scalar {"), std::string::npos) << functors;
  EXPECT_NE(functors.find("constexpr float negative_slope = static_cast<float>(0.2);"), std::string::npos);
  EpilogueTree relu = EpilogueTree::from_json(json::parse(R"(["relu", ["max", "acc", -0.5]])"));
  EXPECT_EQ(scalar_epilogue_expression(relu), activation_functor_name(relu) + "Scalar{}(fmaxf(acc, -0.5f))");
  EXPECT_EQ(activation_scalar_functors(relu, /*all=*/false), "") << "CUTLASS has relu's functor";
  EXPECT_NE(activation_scalar_functors(relu, /*all=*/true).find("x < 0.0f ? 0.0f : x"), std::string::npos);
  for (const char* bad : {R"(["add", "acc", "C"])", R"(["add", "acc", {"col": "vec0"}])"}) {
    try {
      scalar_epilogue_expression(EpilogueTree::from_json(json::parse(bad)));
      ADD_FAILURE() << bad << " has no per-element form here";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no per-element form"), std::string::npos) << e.what();
    }
  }
}
