// The discovery plan: make_plan on the problem fixtures, the JSON round trip stage 2 relies on,
// the errors plan_from_json gives on bad plans, default numerics and the printed table.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/arch_spec.h"
#include "discover/pattern_registry.h"
#include "discover/plan.h"
#include "ir/ir_io.h"
#include "ir_test_graphs.h"

using fact::discover::Plan;
using fact::test::GraphDoc;
using fact::test::Json;
using fact::test::ref_to;

namespace {

const fact::ir::OpTable& ops() { return fact::ir::OpTable::builtin(); }

fact::ir::Graph fixture(const std::string& name) {
  return fact::ir::load_graph(std::string(FACT_TEST_DATA) + "/ir/" + name, ops());
}

Plan plan_for(const std::string& name, const std::string& numerics = "3xtf32", const std::string& arch = "sm90") {
  static const auto registry = fact::discover::PatternRegistry::builtin();
  return fact::discover::make_plan(fixture(name), registry, ops(), fact::ArchSpec::builtin(arch),
                                   fact::numerics_from_string(numerics));
}

// plan_from_json's Error message, or "" if it accepted the document.
std::string load_error(const Json& doc) {
  try {
    fact::discover::plan_from_json(doc, "plan.json", ops());
  } catch (const fact::Error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(Plan, MakePlanOnFixtures) {
  auto large_k = plan_for("large_k_matmul.json");
  EXPECT_EQ(large_k.arch, fact::Arch::sm90);
  EXPECT_EQ(large_k.numerics, fact::Numerics::x3tf32);
  ASSERT_EQ(large_k.entries.size(), 1u);
  EXPECT_EQ(large_k.entries[0].match.rule, "large_k_gemm");
  EXPECT_TRUE(large_k.uncovered_ops.empty());
  EXPECT_GT(large_k.seconds_now, 0);
  EXPECT_NEAR(large_k.seconds_planned, large_k.seconds_now - large_k.entries[0].cost.gain_seconds(), 1e-12);

  auto batched = plan_for("batched_matmul.json", "tf32", "sm80");
  EXPECT_EQ(batched.arch, fact::Arch::sm80);
  ASSERT_EQ(batched.entries.size(), 1u);
  EXPECT_EQ(batched.entries[0].match.rule, "batched_gemm");

  auto llama = plan_for("llama3_block.json");
  ASSERT_FALSE(llama.entries.empty());
  for (size_t i = 1; i < llama.entries.size(); ++i)
    EXPECT_GE(llama.entries[i - 1].cost.gain_seconds(), llama.entries[i].cost.gain_seconds());
  EXPECT_LT(llama.seconds_planned, llama.seconds_now);
}

TEST(Plan, UncoveredOpsAreListedWithoutViews) {
  auto plan = plan_for("minigpt_block.json");
  // eq builds the mask and contiguous copies the attention output: no rule covers them.
  EXPECT_EQ(plan.uncovered_ops, (std::map<std::string, int>{{"aten.contiguous.default", 1}, {"aten.eq.Scalar", 1}}));

  // A graph no rule matches (and no generated row-wise kernel takes: eq makes booleans): every non-view op
  // is left to PyTorch, counted per op.
  GraphDoc d;
  d.input("x", {8, 8});
  d.op("r", "aten.eq.Scalar", {ref_to("x"), 0}, {8, 8}, "bool");
  d.op("v", "aten.view.default", {ref_to("r"), Json::array({64})}, {64}, "bool");
  d.op("r2", "aten.eq.Scalar", {ref_to("v"), 1}, {64}, "bool");
  d.output("r2");
  auto g = d.graph();
  auto p = fact::discover::make_plan(g, fact::discover::PatternRegistry::builtin(), ops(),
                                     fact::ArchSpec::builtin("sm90"), fact::Numerics::x3tf32);
  EXPECT_TRUE(p.entries.empty());
  EXPECT_EQ(p.uncovered_ops, (std::map<std::string, int>{{"aten.eq.Scalar", 2}}));
  EXPECT_DOUBLE_EQ(p.seconds_planned, p.seconds_now);
  std::string table = fact::discover::format_plan(p);
  EXPECT_TRUE(has(table, "no pattern of the registry matched")) << table;
  EXPECT_TRUE(has(table, "aten.eq.Scalar x2")) << table;
}

TEST(Plan, JsonRoundTrip) {
  auto plan = plan_for("minigpt_block.json");
  Json doc = fact::discover::to_json(plan);
  EXPECT_EQ(doc["format"], "fact-plan");
  EXPECT_EQ(doc["version"], fact::discover::kPlanVersion);
  EXPECT_EQ(doc["baseline_numerics"], "fp32");
  ASSERT_EQ(doc["patterns"].size(), plan.entries.size());
  for (size_t i = 0; i < plan.entries.size(); ++i) EXPECT_EQ(doc["patterns"][i]["rank"], i + 1);

  // Through text, as `fact tune` reads it.
  Plan back = fact::discover::plan_from_json(Json::parse(doc.dump(1)), "plan.json", ops());
  EXPECT_EQ(back.arch, plan.arch);
  EXPECT_EQ(back.numerics, plan.numerics);
  EXPECT_EQ(back.graph.nodes.size(), plan.graph.nodes.size());
  EXPECT_EQ(fact::ir::to_json(back.graph), fact::ir::to_json(plan.graph));
  ASSERT_EQ(back.entries.size(), plan.entries.size());
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const auto& a = plan.entries[i];
    const auto& b = back.entries[i];
    SCOPED_TRACE(a.match.rule + "@" + a.match.anchor);
    EXPECT_EQ(b.match.rule, a.match.rule);
    EXPECT_EQ(b.match.family, a.match.family);
    EXPECT_EQ(b.match.anchor, a.match.anchor);
    EXPECT_EQ(b.match.nodes, a.match.nodes);
    EXPECT_EQ(b.match.inputs, a.match.inputs);
    EXPECT_EQ(b.match.attrs, a.match.attrs);
    EXPECT_EQ(b.match.dims, a.match.dims);
    EXPECT_EQ(b.match.dtype, a.match.dtype);
    EXPECT_EQ(b.match.kernel, a.match.kernel);
    EXPECT_EQ(b.match.examples, a.match.examples);
    EXPECT_EQ(b.match.priority, a.match.priority);
    EXPECT_DOUBLE_EQ(b.cost.flops, a.cost.flops);
    EXPECT_DOUBLE_EQ(b.cost.bytes_now, a.cost.bytes_now);
    EXPECT_DOUBLE_EQ(b.cost.bytes_fused, a.cost.bytes_fused);
    EXPECT_EQ(b.cost.kernels_now, a.cost.kernels_now);
    EXPECT_NEAR(b.cost.seconds_now, a.cost.seconds_now, 1e-15);
    EXPECT_NEAR(b.cost.seconds_fused, a.cost.seconds_fused, 1e-15);
    EXPECT_NEAR(b.cost.gain_seconds(), a.cost.gain_seconds(), 1e-15);
    EXPECT_EQ(b.cost.bound, a.cost.bound);
  }
  // The attention match keeps its bound literals (causal flag, softmax scale) and dims.
  const auto* att = &back.entries[0];
  for (auto& e : back.entries)
    if (e.match.rule == "sdpa_attention_manual") att = &e;
  ASSERT_EQ(att->match.rule, "sdpa_attention_manual");
  EXPECT_EQ(att->match.attrs.at("causal"), true);
  EXPECT_NEAR(att->match.attrs.at("scale").get<double>(), 0.10206207261596577, 1e-12);
  EXPECT_EQ(att->match.dims.at("head_dim"), 96);
}

TEST(Plan, FromJsonRejectsBadPlans) {
  const Json good = fact::discover::to_json(plan_for("standard_matmul.json"));
  ASSERT_EQ(load_error(good), "");

  Json wrong_format = good;
  wrong_format["format"] = "fact-ir";
  std::string msg = load_error(wrong_format);
  EXPECT_TRUE(has(msg, "plan.json") && has(msg, "not a FACT plan") && has(msg, "'format'")) << msg;

  Json format_not_string = good;
  format_not_string["format"] = 7;
  msg = load_error(format_not_string);
  EXPECT_TRUE(has(msg, "not a FACT plan")) << msg;

  Json not_object = Json::array({good});
  EXPECT_TRUE(has(load_error(not_object), "not a FACT plan"));

  Json wrong_version = good;
  wrong_version["version"] = 2;
  msg = load_error(wrong_version);
  EXPECT_TRUE(has(msg, "plan.json") && has(msg, "version 2") && has(msg, "re-run `fact discover`")) << msg;

  Json version_string = good;
  version_string["version"] = "1";
  msg = load_error(version_string);
  EXPECT_TRUE(has(msg, "plan.json") && has(msg, "version \"1\"")) << msg;

  Json no_version = good;
  no_version.erase("version");
  EXPECT_TRUE(has(load_error(no_version), "version"));

  Json no_arch = good;
  no_arch.erase("arch");
  msg = load_error(no_arch);
  EXPECT_TRUE(has(msg, "plan.json: plan has no field 'arch'")) << msg;

  Json no_ir = good;
  no_ir.erase("ir");
  EXPECT_TRUE(has(load_error(no_ir), "no field 'ir'"));

  Json no_dims = good;
  no_dims["patterns"][0].erase("dims");
  msg = load_error(no_dims);
  EXPECT_TRUE(has(msg, "pattern #1 has no field 'dims'")) << msg;

  Json no_cost = good;
  no_cost["patterns"][0].erase("cost");
  EXPECT_TRUE(has(load_error(no_cost), "pattern #1 has no field 'cost'"));

  Json bad_type = good;
  bad_type["patterns"][0]["nodes"] = "matmul";
  msg = load_error(bad_type);
  EXPECT_TRUE(has(msg, "plan.json: malformed plan")) << msg;

  Json ghost_node = good;
  ghost_node["patterns"][0]["nodes"].push_back("no_such_node");
  msg = load_error(ghost_node);
  EXPECT_TRUE(has(msg, "pattern #1 covers node 'no_such_node', which the IR lacks")) << msg;

  Json ghost_anchor = good;
  ghost_anchor["patterns"][0]["anchor"] = "no_such_anchor";
  msg = load_error(ghost_anchor);
  EXPECT_TRUE(has(msg, "pattern #1") && has(msg, "'no_such_anchor'")) << msg;

  Json ghost_input = good;
  ghost_input["patterns"][0]["inputs"]["$a"] = "no_such_input";
  msg = load_error(ghost_input);
  EXPECT_TRUE(has(msg, "pattern #1") && has(msg, "'no_such_input'")) << msg;

  Json bad_ir = good;
  bad_ir["ir"]["nodes"][2]["category"] = "frobnicate";
  bad_ir["ir"]["nodes"][2]["op"] = "aten.frobnicate.default";
  msg = load_error(bad_ir);
  EXPECT_TRUE(has(msg, "plan.json (embedded IR)") && has(msg, "unknown op category 'frobnicate'")) << msg;
}

TEST(Plan, DefaultNumericsFollowsTheGraphDtype) {
  auto one_input = [](const std::string& dtype) {
    GraphDoc d;
    d.input("x", {4, 4}, dtype).op("r", "aten.relu.default", {ref_to("x")}, {4, 4}, dtype).output("r");
    return d.graph();
  };
  EXPECT_EQ(fact::discover::default_numerics(one_input("float32")), fact::Numerics::x3tf32);
  EXPECT_EQ(fact::discover::default_numerics(one_input("bfloat16")), fact::Numerics::bf16);
  EXPECT_EQ(fact::discover::default_numerics(one_input("float16")), fact::Numerics::fp16);
  EXPECT_EQ(fact::discover::default_numerics(fixture("minigpt_block.json")), fact::Numerics::x3tf32);

  // Token ids in, bfloat16 weights: the weights' dtype is the graph's floating dtype.
  GraphDoc d;
  d.input("ids", {2, 16}, "int64").input("emb", {100, 32}, "bfloat16", "parameter");
  d.op("e", "aten.embedding.default", {ref_to("emb"), ref_to("ids")}, {2, 16, 32}, "bfloat16").output("e");
  EXPECT_EQ(fact::discover::default_numerics(d.graph()), fact::Numerics::bf16);
}

TEST(Plan, FormatPlanNamesEveryPattern) {
  auto plan = plan_for("minigpt_block.json");
  std::string table = fact::discover::format_plan(plan);
  EXPECT_TRUE(has(table, "numerics 3xtf32, PyTorch baseline fp32")) << table;
  EXPECT_TRUE(has(table, "sm90")) << table;
  for (auto& e : plan.entries) {
    EXPECT_TRUE(has(table, e.match.rule)) << e.match.rule << "\n" << table;
    EXPECT_TRUE(has(table, "(anchor " + e.match.anchor + ")")) << e.match.anchor << "\n" << table;
  }
  EXPECT_TRUE(has(table, "sdpa_attention_manual") && has(table, "gemm_bias_gelu_tanh") && has(table, "layer_norm"));
  EXPECT_TRUE(has(table, "Left to PyTorch: aten.contiguous.default x1, aten.eq.Scalar x1")) << table;
  EXPECT_TRUE(has(table, "roofline estimate, not a measurement")) << table;
  // Rows come in plan order: the first entry's rule appears before the last one's.
  EXPECT_LT(table.find(" " + plan.entries.front().match.rule + " "), table.find("(anchor " + plan.entries.back().match.anchor + ")"));
}

// The tracer's notes (an attention mask folded into is_causal) come first among the plan's notes, in the table and
// in plan.json, and survive the IR's JSON round trip; a notes field that is not a list of strings is refused.
TEST(Plan, TracerNotesLeadThePlanNotes) {
  Json doc = fact::ir::to_json(fixture("minigpt_block.json"));
  const std::string note = "attn_mask expand_1 of scaled_dot_product_attention folded: causal (test)";
  doc["notes"] = Json::array({note});
  auto graph = fact::ir::parse_graph(doc, "ir.json", ops());
  ASSERT_EQ(graph.notes, std::vector<std::string>{note});
  EXPECT_EQ(fact::ir::to_json(graph)["notes"], doc["notes"]);
  static const auto registry = fact::discover::PatternRegistry::builtin();
  auto plan = fact::discover::make_plan(graph, registry, ops(), fact::ArchSpec::builtin("sm90"),
                                        fact::Numerics::x3tf32);
  ASSERT_FALSE(plan.notes.empty());
  EXPECT_EQ(plan.notes.front(), note);
  EXPECT_TRUE(has(fact::discover::format_plan(plan), "Note: " + note));
  EXPECT_EQ(fact::discover::to_json(plan)["notes"][0], note);
  // plan.json keeps them for `fact tune` and the optimize report.
  EXPECT_EQ(fact::discover::plan_from_json(fact::discover::to_json(plan), "plan.json", ops()).notes, plan.notes);
  EXPECT_FALSE(fact::ir::to_json(fixture("minigpt_block.json")).contains("notes"));  // none: no field
  doc["notes"] = Json::array({1});
  EXPECT_THROW(fact::ir::parse_graph(doc, "ir.json", ops()), fact::Error);
  doc["notes"] = "one";
  EXPECT_THROW(fact::ir::parse_graph(doc, "ir.json", ops()), fact::Error);
}

// An add-norm whose sum the block reads again (Llama in tf32, where it outranks o_proj's GEMM + residual):
// the exported node survives the JSON round trip and is named in the table; a plan exporting a node the
// match does not cover is refused.
TEST(Plan, ExtraOutputsRoundTripAndAreChecked) {
  auto plan = plan_for("llama3_block.json", "tf32");
  const fact::discover::PlanEntry* add_rms = nullptr;
  for (auto& e : plan.entries)
    if (e.match.rule == "add_rms_norm") add_rms = &e;
  ASSERT_NE(add_rms, nullptr) << fact::discover::format_plan(plan);
  EXPECT_EQ(add_rms->match.extra_outputs.at("sum"), "add_3");
  std::string table = fact::discover::format_plan(plan);
  EXPECT_TRUE(has(table, "anchor mul_7; also writes add_3 (sum)")) << table;

  Json doc = fact::discover::to_json(plan);
  Plan back = fact::discover::plan_from_json(Json::parse(doc.dump()), "plan.json", ops());
  for (size_t i = 0; i < plan.entries.size(); ++i)
    EXPECT_EQ(back.entries[i].match.extra_outputs, plan.entries[i].match.extra_outputs);
  for (auto& p : doc["patterns"])
    if (p["rule"] == "add_rms_norm") p["extra_outputs"]["sum"] = "linear_3";
  EXPECT_TRUE(has(load_error(doc), "exports 'linear_3' (sum), which it does not cover")) << load_error(doc);
  // A plan written before extra outputs existed has none.
  for (auto& p : doc["patterns"]) p.erase("extra_outputs");
  Plan old = fact::discover::plan_from_json(doc, "plan.json", ops());
  for (auto& e : old.entries) EXPECT_TRUE(e.match.extra_outputs.empty());
}
