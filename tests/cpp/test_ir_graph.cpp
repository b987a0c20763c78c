#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/error.h"
#include "ir/ir_io.h"
#include "ir/op_table.h"
#include "ir_test_graphs.h"

using fact::test::GraphDoc;
using fact::test::ref_to;
using Json = nlohmann::json;

namespace {

std::string data(const std::string& rel) { return std::string(FACT_TEST_DATA) + "/" + rel; }

GraphDoc small_mlp() {
  GraphDoc d;
  d.input("x", {4, 8}).input("w", {16, 8}, "float32", "parameter").input("b", {16}, "float32", "parameter");
  d.op("linear", "aten.linear.default", {ref_to("x"), ref_to("w"), ref_to("b")}, {4, 16});
  d.op("relu", "aten.relu.default", {ref_to("linear")}, {4, 16});
  d.op("add", "aten.add.Tensor", {ref_to("relu"), ref_to("linear")}, {4, 16});
  d.output("add");
  return d;
}

// Parses `doc` expecting an Error whose message contains every piece of `needles`.
void expect_error(const Json& doc, const std::vector<std::string>& needles) {
  try {
    fact::ir::parse_graph(doc, "bad.json", fact::ir::OpTable::builtin());
    FAIL() << "expected an error mentioning " << needles.front();
  } catch (const fact::Error& e) {
    std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "message: " << msg << "\nmissing: " << n;
  }
}

}  // namespace

TEST(IrOpTable, KnowsCategoriesAndCommutativity) {
  const auto& ops = fact::ir::OpTable::builtin();
  EXPECT_GE(ops.size(), 100u);
  ASSERT_NE(ops.find("aten.mm.default"), nullptr);
  EXPECT_EQ(ops.find("aten.mm.default")->category, fact::ir::OpCategory::Gemm);
  EXPECT_TRUE(ops.find("aten.add.Tensor")->commutative);
  EXPECT_TRUE(ops.find("aten.maximum.default")->commutative);
  EXPECT_FALSE(ops.find("aten.sub.Tensor")->commutative);
  EXPECT_EQ(ops.find("aten.view.default")->category, fact::ir::OpCategory::View);
  EXPECT_EQ(ops.find("aten.softmax.int")->category, fact::ir::OpCategory::Softmax);
  EXPECT_EQ(ops.find("aten.xyz.default"), nullptr);
  EXPECT_THROW(fact::ir::parse_op_category("blas"), fact::Error);
  EXPECT_TRUE(ops.find("aten.conv2d.default")->channels_last) << "cuDNN runs a channels-last x as it is";
  EXPECT_FALSE(ops.find("aten.view.default")->channels_last);
}

TEST(IrOpTable, CoversEveryTracedOp) {
  // docs/traced-ops.txt lists the ops the tracer met in the bench problems.
  std::string path = std::string(FACT_SOURCE_DIR) + "/docs/traced-ops.txt";
  std::ifstream in(path);
  if (!in) GTEST_SKIP() << path << " not written yet";
  std::string op;
  while (std::getline(in, op))
    if (!op.empty() && op[0] != '#') EXPECT_NE(fact::ir::OpTable::builtin().find(op), nullptr) << op;
}

TEST(IrGraph, ParsesIndexesAndFindsUsers) {
  auto g = small_mlp().graph();
  ASSERT_EQ(g.nodes.size(), 6u);
  EXPECT_EQ(g.at("w").kind, fact::ir::NodeKind::Parameter);
  EXPECT_EQ(g.index_of("relu"), 4u);
  EXPECT_EQ(g.users("linear"), (std::vector<std::string>{"relu", "add"}));
  EXPECT_EQ(g.users("add"), (std::vector<std::string>{"<output>"}));
  EXPECT_TRUE(g.users("relu").size() == 1);
  EXPECT_EQ(g.find("nope"), nullptr);
  EXPECT_THROW(g.at("nope"), fact::Error);
  EXPECT_EQ(g.at("linear").out().numel(), 64);
  EXPECT_EQ(g.at("linear").out().bytes(), 256);
  EXPECT_TRUE(g.at("linear").out().is_contiguous());
  EXPECT_THROW(g.at("linear").out(1), fact::Error);
}

// Module state seen through views is still module state (a Linear weight as addmm's t(w)); op results and
// forward inputs are not.
TEST(IrGraph, ModuleStateIsFollowedThroughViews) {
  GraphDoc d;
  d.input("x", {4, 8}).input("w", {16, 8}, "float32", "parameter").input("m", {8}, "float32", "buffer");
  d.op("wt", "aten.t.default", {ref_to("w")}, {8, 16});
  d.op("wv", "aten.view.default", {ref_to("wt"), Json::array({8, 16})}, {8, 16});
  d.op("xt", "aten.t.default", {ref_to("x")}, {8, 4});
  d.op("mm", "aten.mm.default", {ref_to("x"), ref_to("wv")}, {4, 16});
  d.op("mt", "aten.t.default", {ref_to("mm")}, {16, 4});
  d.output("mt").output("xt");
  fact::ir::Graph g = d.graph();
  for (const char* name : {"w", "m", "wt", "wv"}) EXPECT_TRUE(fact::ir::is_module_state(g, g.at(name))) << name;
  for (const char* name : {"x", "xt", "mm", "mt"}) EXPECT_FALSE(fact::ir::is_module_state(g, g.at(name))) << name;
}

TEST(IrGraph, RoundTripsThroughJson) {
  auto g = small_mlp().graph();
  auto again = fact::ir::parse_graph(fact::ir::to_json(g), "round trip", fact::ir::OpTable::builtin());
  EXPECT_EQ(fact::ir::format_graph(g), fact::ir::format_graph(again));
}

// A tensor constant forward() makes from Python numbers carries its values (the composed module makes it again);
// only a constant node holds them, and only numbers, booleans or nested lists.
TEST(IrGraph, ForwardMadeConstantsKeepTheirValues) {
  GraphDoc d = small_mlp();
  d.input("c", {}, "float32", "constant");
  Json doc = d.json();
  doc["nodes"].back()["value"] = 0.25;
  auto g = fact::ir::parse_graph(doc, "constant", fact::ir::OpTable::builtin());
  EXPECT_EQ(g.at("c").value, Json(0.25));
  EXPECT_EQ(fact::ir::to_json(g)["nodes"].back()["value"], Json(0.25));
  EXPECT_FALSE(fact::ir::to_json(g)["nodes"].front().contains("value")) << "written only where there is one";
  doc["nodes"].back()["value"] = "a";
  expect_error(doc, {"field 'value'", "nested lists"});
  doc["nodes"].back()["value"] = 1;
  doc["nodes"].back()["kind"] = "parameter";
  expect_error(doc, {"field 'value'", "only a constant node"});
}

TEST(IrGraph, LoadsTracedMiniGptAndPrintsIt) {
  auto g = fact::ir::load_graph(data("ir/minigpt_block.json"), fact::ir::OpTable::builtin());
  EXPECT_EQ(g.at("x").kind, fact::ir::NodeKind::Input);
  EXPECT_EQ(g.at("x").out().shape, (std::vector<int64_t>{128, 512, 768}));
  EXPECT_EQ(g.at("split").outputs.size(), 3u);
  EXPECT_FALSE(g.at("getitem").out().is_contiguous());
  std::string text = fact::ir::format_graph(g);
  EXPECT_NE(text.find("%linear = aten.linear.default(%layer_norm, %p_attn_c_attn_weight, %p_attn_c_attn_bias) : "
                      "float32[128, 512, 2304]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("aten.masked_fill.Scalar(%mul, %eq, -inf)"), std::string::npos) << text;
  EXPECT_NE(text.find("return %add_3"), std::string::npos);
}

TEST(IrValidate, RejectsWrongFormatAndVersion) {
  auto d = small_mlp();
  d.json()["format"] = "onnx";
  expect_error(d.json(), {"bad.json", "fact-ir"});
  d = small_mlp();
  d.json()["version"] = 2;
  expect_error(d.json(), {"bad.json", "version 2", "re-trace"});
  expect_error(Json::array(), {"bad.json", "object"});
}

TEST(IrValidate, RejectsMissingFieldsNamingTheNode) {
  auto d = small_mlp();
  d.json()["nodes"][3].erase("op");
  expect_error(d.json(), {"node 'linear'", "missing field 'op'"});
  d = small_mlp();
  d.json()["nodes"][4].erase("outputs");
  expect_error(d.json(), {"node 'relu'", "'outputs'"});
  d = small_mlp();
  d.json()["nodes"][0].erase("target");
  expect_error(d.json(), {"node 'x'", "'target'"});
  d = small_mlp();
  d.json()["nodes"][1].erase("name");
  expect_error(d.json(), {"nodes[1]", "'name'"});
  d = small_mlp();
  d.json().erase("nodes");
  expect_error(d.json(), {"missing field 'nodes'"});
}

TEST(IrValidate, RejectsWrongTypes) {
  auto d = small_mlp();
  d.json()["nodes"][3]["args"] = "x";
  expect_error(d.json(), {"node 'linear'", "'args' must be an array"});
  d = small_mlp();
  d.json()["nodes"][3]["outputs"][0]["shape"] = {4, "16"};
  expect_error(d.json(), {"node 'linear'", "'shape'"});
  d = small_mlp();
  d.json()["nodes"][3]["outputs"][0]["strides"] = {1};
  expect_error(d.json(), {"node 'linear'", "strides"});
  d = small_mlp();
  d.json()["nodes"][3]["outputs"][0]["dtype"] = "float33";
  expect_error(d.json(), {"node 'linear'", "float33"});
  d = small_mlp();
  d.json()["nodes"][0]["kind"] = "weight";
  expect_error(d.json(), {"node 'x'", "'weight'"});
}

TEST(IrValidate, RejectsBadReferences) {
  auto d = small_mlp();
  d.json()["nodes"][4]["args"][0] = ref_to("ghost");
  expect_error(d.json(), {"node 'relu'", "'ghost'", "no node defines"});
  d = small_mlp();
  d.json()["nodes"][4]["args"][0] = ref_to("add");
  expect_error(d.json(), {"node 'relu'", "'add'", "defined later", "topological"});
  d = small_mlp();
  d.json()["nodes"][5]["args"] = {Json::array({ref_to("relu"), ref_to("nowhere")})};
  expect_error(d.json(), {"node 'add'", "'nowhere'"});
  d = small_mlp();
  d.json()["outputs"] = {ref_to("missing")};
  expect_error(d.json(), {"outputs[0]", "'missing'"});
}

TEST(IrValidate, RejectsDuplicateNames) {
  auto d = small_mlp();
  d.json()["nodes"][4]["name"] = "linear";
  expect_error(d.json(), {"nodes[4]", "'linear'", "unique"});
}

// Open world: an op in no table of FACT's is valid; its category is what the tracer read from PyTorch's tags,
// "other" without one, and FACT's table overrides the traced one for the ops it knows.
TEST(IrValidate, AcceptsOpsNoTableKnows) {
  const auto& ops = fact::ir::OpTable::builtin();
  auto d = small_mlp();
  d.json()["nodes"][4]["op"] = "aten.xyz.default";
  d.json()["nodes"][4]["category"] = "elementwise";
  auto g = fact::ir::parse_graph(d.json(), "test", ops);
  EXPECT_EQ(g.at(d.json()["nodes"][4]["name"].get<std::string>()).category, fact::ir::OpCategory::Elementwise);

  d.json()["nodes"][4].erase("category");
  g = fact::ir::parse_graph(d.json(), "test", ops);
  EXPECT_EQ(g.at(d.json()["nodes"][4]["name"].get<std::string>()).category, fact::ir::OpCategory::Other);

  d.json()["nodes"][4]["op"] = "aten.mm.default";
  d.json()["nodes"][4]["category"] = "elementwise";
  ASSERT_NE(ops.find("aten.mm.default"), nullptr);
  g = fact::ir::parse_graph(d.json(), "test", ops);
  EXPECT_EQ(g.at(d.json()["nodes"][4]["name"].get<std::string>()).category, fact::ir::OpCategory::Gemm);

  d.json()["nodes"][4]["category"] = "sparkly";
  expect_error(d.json(), {"unknown op category 'sparkly'"});
}

TEST(IrValidate, LoadNamesTheFile) {
  try {
    fact::ir::load_graph(data("ir/does_not_exist.json"), fact::ir::OpTable::builtin());
    FAIL();
  } catch (const fact::Error& e) {
    EXPECT_NE(std::string(e.what()).find("does_not_exist.json"), std::string::npos);
  }
}
