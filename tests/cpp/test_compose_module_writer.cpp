// The composer on the MiniGPT plan: a winning GEMM pattern becomes one torch.ops.fact call, a losing one
// stays ATen with its reason, and a tune report of another plan is an Error naming the row.
#include <gtest/gtest.h>

#include <string>

#include "compose/module_writer.h"
#include "compose/pattern_verdicts.h"
#include "core/error.h"
#include "discover/arch_spec.h"
#include "discover/pattern_registry.h"
#include "discover/plan.h"
#include "ir/ir_io.h"

using nlohmann::json;

namespace {

fact::discover::Plan minigpt_plan() {
  const auto& ops = fact::ir::OpTable::builtin();
  static const auto registry = fact::discover::PatternRegistry::builtin();
  auto graph = fact::ir::load_graph(std::string(FACT_TEST_DATA) + "/ir/minigpt_block.json", ops);
  return fact::discover::make_plan(graph, registry, ops, fact::discover::ArchSpec::builtin("sm90"), "3xtf32");
}

// Accepts the first GEMM entry, rejects the second with timings.
json report_for(const fact::discover::Plan& plan, size_t* accepted, size_t* rejected) {
  json rows = json::array();
  int gemms = 0;
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const auto& m = plan.entries[i].match;
    if (m.family != "gemm" || gemms >= 2) continue;
    json row = {{"pattern", m.rule}, {"anchor", m.anchor}, {"status", "tuned"}, {"baseline", "torch"},
                {"fact_ms", 1.05}, {"baseline_ms", 1.01}, {"config", nullptr}, {"winner", "torch"}};
    if (gemms++ == 0) {
      row["winner"] = "cfg0";
      row["config"] = {{"epilogue", "bias"}};
      row["fact_ms"] = 0.5;
      *accepted = i;
    } else {
      *rejected = i;
    }
    rows.push_back(row);
  }
  return {{"format", "fact-tune-report"}, {"version", 1}, {"rows", rows}};
}

}  // namespace

TEST(ComposeModuleWriter, AcceptedPatternIsOneFactCallAndRejectedOneKeepsItsReason) {
  auto plan = minigpt_plan();
  size_t accepted = 0, rejected = 0;
  auto verdicts = fact::compose::pattern_verdicts(plan, report_for(plan, &accepted, &rejected), "report.json");
  ASSERT_TRUE(verdicts[accepted].accepted);
  ASSERT_FALSE(verdicts[rejected].accepted);
  std::string text = fact::compose::model_new_source(plan, verdicts);
  EXPECT_NE(text.find("class ModelNew(Model):"), std::string::npos);
  EXPECT_NE(text.find("torch.ops.fact.gemm_cfg0("), std::string::npos) << text;
  EXPECT_NE(text.find("PyTorch kept: best FACT kernel 1.05 ms vs torch 1.01 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("self.get_parameter("), std::string::npos);

  auto manifest = fact::compose::composed_manifest(plan, verdicts, {"model.py", "plan.json", "report.json", ""});
  EXPECT_EQ(manifest["format"], "fact-composed-module");
  EXPECT_EQ(manifest["accepted"].size(), 1u);
}

TEST(ComposeModuleWriter, ReportOfAnotherPlanIsAnError) {
  auto plan = minigpt_plan();
  json report = {{"format", "fact-tune-report"},
                 {"rows", json::array({{{"pattern", "gemm"}, {"anchor", "no_such_node"}, {"status", "tuned"}}})}};
  try {
    fact::compose::pattern_verdicts(plan, report, "report.json");
    FAIL() << "expected an Error";
  } catch (const fact::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("report.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("no_such_node"), std::string::npos) << msg;
  }
}

TEST(ComposeModuleWriter, WithNothingAcceptedTheOriginalForwardRunsUnchanged) {
  auto plan = minigpt_plan();
  size_t accepted = 0, rejected = 0;
  json report = report_for(plan, &accepted, &rejected);
  for (auto& row : report["rows"]) row["config"] = nullptr, row["winner"] = "torch", row["fact_ms"] = 2.0;
  auto verdicts = fact::compose::pattern_verdicts(plan, report, "report.json");
  for (const auto& v : verdicts) ASSERT_FALSE(v.accepted);
  std::string text = fact::compose::model_new_source(plan, verdicts);
  // Replaying the ATen graph op by op would only add dispatch time (measured 0.129 vs 0.122 ms on a GEMM).
  EXPECT_NE(text.find("return super().forward(x)"), std::string::npos) << text;
  EXPECT_EQ(text.find("torch.ops.aten."), std::string::npos) << text;
}
