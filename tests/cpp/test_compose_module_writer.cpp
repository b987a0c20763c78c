// The composer on the MiniGPT plan: a winning GEMM pattern becomes one torch.ops.fact call, a losing one
// stays ATen with its reason, and a tune report of another plan is an Error naming the row.
#include <gtest/gtest.h>

#include <string>

#include "compose/module_writer.h"
#include "compose/pattern_verdicts.h"
#include "core/error.h"
#include "core/arch_spec.h"
#include "discover/pattern_registry.h"
#include "discover/plan.h"
#include "ir/ir_io.h"

using nlohmann::json;

namespace {

fact::discover::Plan minigpt_plan() {
  const auto& ops = fact::ir::OpTable::builtin();
  static const auto registry = fact::discover::PatternRegistry::builtin();
  auto graph = fact::ir::load_graph(std::string(FACT_TEST_DATA) + "/ir/minigpt_block.json", ops);
  return fact::discover::make_plan(graph, registry, ops, fact::ArchSpec::builtin("sm90"), fact::Numerics::x3tf32);
}

// Accepts the first GEMM entry, rejects the second with timings.
json report_for(const fact::discover::Plan& plan, size_t* accepted, size_t* rejected) {
  json rows = json::array();
  int gemms = 0;
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const auto& m = plan.entries[i].match;
    if (m.family != "gemm" || gemms >= 2) continue;
    json row = {{"pattern", m.rule}, {"anchor", m.anchor}, {"status", "tuned"}, {"baseline", "torch"},
                {"fact_ms", 1.05}, {"baseline_ms", 1.01}, {"config", nullptr}, {"winner", "torch"},
                {"family", "gemm"}, {"problem", {{"epilogue", "bias"}}}};
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
  EXPECT_NE(text.find("state = _state(self)"), std::string::npos) << "parameters read through _state, in _STATE's order";
  EXPECT_NE(text.find(" = state[0]  # "), std::string::npos);
  EXPECT_NE(text.find("_STATE = json.loads(\"[[\\\"parameter\\\",\\\""), std::string::npos) << text.substr(0, 3000);

  auto manifest = fact::compose::composed_manifest(plan, verdicts, {"model.py", "plan.json", "report.json", ""});
  EXPECT_EQ(manifest["format"], "fact-composed-module");
  EXPECT_EQ(manifest["accepted"].size(), 1u);
}

// A cached PyTorch winner whose workload never had a verified FACT kernel (no fact_ms) says so, not "? ms".
TEST(ComposeModuleWriter, KeptPatternWithoutAVerifiedKernelSaysSo) {
  auto plan = minigpt_plan();
  size_t accepted = 0, rejected = 0;
  json report = report_for(plan, &accepted, &rejected);
  for (auto& row : report["rows"])
    if (row["winner"] == "torch") {
      row["status"] = "cached";
      row["fact_ms"] = nullptr;
    }
  auto verdicts = fact::compose::pattern_verdicts(plan, report, "report.json");
  EXPECT_EQ(verdicts[rejected].reason, "PyTorch kept: no FACT kernel verified (torch 1.01 ms)");
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
  EXPECT_NE(text.find("return super().forward(*args, **kwargs)"), std::string::npos) << text;
  EXPECT_EQ(text.find("torch.ops.aten."), std::string::npos) << text;
}

namespace {

fact::discover::Plan llama_tf32_plan() {
  const auto& ops = fact::ir::OpTable::builtin();
  static const auto registry = fact::discover::PatternRegistry::builtin();
  auto graph = fact::ir::load_graph(std::string(FACT_TEST_DATA) + "/ir/llama3_block.json", ops);
  return fact::discover::make_plan(graph, registry, ops, fact::ArchSpec::builtin("sm90"), fact::Numerics::tf32);
}

// A report in which only the add_rms_norm pattern won, with a kernel that does (or does not) write the sum.
json add_norm_report(const fact::discover::Plan& plan, bool store_sum) {
  json rows = json::array();
  for (const auto& e : plan.entries)
    if (e.match.rule == "add_rms_norm")
      rows.push_back({{"pattern", e.match.rule}, {"anchor", e.match.anchor}, {"family", "normalization"},
                      {"status", "tuned"}, {"baseline", "torch"}, {"fact_ms", 0.05}, {"baseline_ms", 0.1},
                      {"winner", "norm_addrms"},
                      {"config", {{"family", "normalization"}, {"kind", "rms_norm"}, {"store_sum", store_sum}}},
                      {"problem", {{"eps", 1e-5}}}});
  return {{"format", "fact-tune-report"}, {"version", 1}, {"rows", rows}};
}

}  // namespace

// The post-attention add + RMSNorm of the Llama block: one op call returns (normed, sum), both bound, and the
// block's second residual add reads the sum from the op instead of the removed aten.add.
TEST(ComposeModuleWriter, AddNormCallBindsTheNormAndTheSumTheBlockReadsAgain) {
  auto plan = llama_tf32_plan();
  auto report = add_norm_report(plan, true);
  ASSERT_EQ(report["rows"].size(), 1u) << fact::discover::format_plan(plan);
  auto verdicts = fact::compose::pattern_verdicts(plan, report, "report.json");
  size_t accepted = 0;
  for (const auto& v : verdicts) accepted += v.accepted;
  ASSERT_EQ(accepted, 1u);
  std::string text = fact::compose::model_new_source(plan, verdicts);
  auto call = text.find("= torch.ops.fact.norm_addrms(");
  ASSERT_NE(call, std::string::npos) << text;
  // "vN, vN_sum = torch.ops.fact.norm_addrms(x, residual, weight, None, 1e-05)  # mul_7, add_3"
  auto line_start = text.rfind('\n', call) + 1;
  std::string line = text.substr(line_start, text.find('\n', call) - line_start);
  auto comma = line.find(", ");
  std::string anchor_var = line.substr(line.find_first_not_of(' '), comma - line.find_first_not_of(' '));
  EXPECT_NE(line.find(anchor_var + ", " + anchor_var + "_sum = "), std::string::npos) << line;
  EXPECT_NE(line.find(", None, 1e-05)  # mul_7, add_3"), std::string::npos) << line;
  // The closing residual add (add_5, a GEMM + residual left to PyTorch here) reads the op's sum.
  EXPECT_NE(text.find("torch.ops.aten.add.Tensor(" + anchor_var + "_sum, "), std::string::npos) << text;
  EXPECT_EQ(text.find("# add_3\n"), std::string::npos) << text;  // the aten.add of the sum is gone

  // A kernel tuned without the sum cannot stand in: PyTorch keeps the pattern, and says why.
  auto without = fact::compose::pattern_verdicts(plan, add_norm_report(plan, false), "report.json");
  for (const auto& v : without) {
    if (plan.entries[v.entry].match.rule != "add_rms_norm") continue;
    EXPECT_FALSE(v.accepted);
    EXPECT_NE(v.reason.find("does not return 'sum' (node 'add_3')"), std::string::npos) << v.reason;
  }
}

// A reason with line breaks (an exception's message with PyTorch's dispatcher table, from the end-to-end gate) is
// folded into one comment line, so the module still parses.
TEST(ComposeModuleWriter, AMultiLineReasonStaysOneCommentLine) {
  auto plan = minigpt_plan();
  size_t accepted = 0, rejected = 0;
  auto verdicts = fact::compose::pattern_verdicts(plan, report_for(plan, &accepted, &rejected), "report.json");
  verdicts[rejected].reason = "e2e_fallback: composed module raised NotImplementedError: no CPU kernel.\n\n"
                              "CUDA: registered at ops.cpp:135 [kernel]\nMeta: registered at ops.cpp:136 [kernel]";
  std::string text = fact::compose::model_new_source(plan, verdicts);
  EXPECT_NE(text.find("no CPU kernel. CUDA: registered at ops.cpp:135 [kernel] Meta: registered"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("\nCUDA: registered"), std::string::npos);
  EXPECT_EQ(text.find("\nMeta: registered"), std::string::npos);
}
