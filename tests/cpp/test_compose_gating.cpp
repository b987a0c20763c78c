// Gating of `fact optimize`: the tune report's winners that lose (failed build, op missing at load time,
// composed module incorrect or slower end to end), a winner that was not measured faster, and the report's
// "e2e" object, "patterns" rows and Markdown tables.
#include <gtest/gtest.h>

#include <string>

#include "compose/e2e_gate.h"
#include "compose/optimize_report.h"
#include "compose/pattern_verdicts.h"
#include "compose/tune_report_edit.h"
#include "core/arch_spec.h"
#include "discover/pattern_registry.h"
#include "discover/plan.h"
#include "ir/ir_io.h"

using nlohmann::json;
using fact::compose::E2eGate;

namespace {

fact::discover::Plan minigpt_plan() {
  const auto& ops = fact::ir::OpTable::builtin();
  static const auto registry = fact::discover::PatternRegistry::builtin();
  auto graph = fact::ir::load_graph(std::string(FACT_TEST_DATA) + "/ir/minigpt_block.json", ops);
  return fact::discover::make_plan(graph, registry, ops, fact::ArchSpec::builtin("sm90"), fact::Numerics::tf32);
}

// Every GEMM-family entry of the plan won with config "cfg<i>" at the given FACT time (PyTorch 1.0 ms).
json winning_report(const fact::discover::Plan& plan, double fact_ms) {
  json rows = json::array();
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const auto& m = plan.entries[i].match;
    if (m.family != "gemm") continue;
    rows.push_back({{"pattern", m.rule}, {"anchor", m.anchor}, {"status", "tuned"}, {"baseline", "torch"},
                    {"fact_ms", fact_ms}, {"baseline_ms", 1.0}, {"rel_err", 1e-4}, {"numerics", "tf32"},
                    {"winner", "cfg" + std::to_string(i)}, {"config", {{"epilogue", "none"}}}, {"family", "gemm"},
                    {"problem", {{"epilogue", "none"}}}});
  }
  return {{"format", "fact-tune-report"}, {"version", 1}, {"rows", rows}};
}

size_t accepted_count(const std::vector<fact::compose::PatternVerdict>& v) {
  size_t n = 0;
  for (const auto& x : v) n += x.accepted;
  return n;
}

json good_run() {
  return {{"status", "ok"}, {"correct", true}, {"numerics", "tf32"}, {"eager_ms", 13.0}, {"composed_ms", 8.0},
          {"compile_default_ms", 6.0}, {"compile_reduce_overhead_ms", 5.0}, {"compile_max_autotune_ms", nullptr},
          {"rel_err_composed", 1e-4}, {"rel_err_original", 1e-4},
          {"variants",
           {{"eager", {{"status", "ok"}, {"ms", 13.0}}},
            {"composed", {{"status", "ok"}, {"ms", 8.0}}},
            {"compile_default", {{"status", "ok"}, {"ms", 6.0}, {"first_call_s", 40.0}}},
            {"compile_reduce_overhead", {{"status", "ok"}, {"ms", 5.0}, {"first_call_s", 45.0}}},
            {"compile_max_autotune", {{"status", "failed"}, {"error", "BackendCompilerFailed: boom"}}}}}};
}

}  // namespace

TEST(ComposeGating, WinnerNotMeasuredFasterThanPyTorchIsRejected) {
  auto plan = minigpt_plan();
  auto fast = fact::compose::pattern_verdicts(plan, winning_report(plan, 0.5), "r.json");
  ASSERT_GT(accepted_count(fast), 0u);
  auto slow = fact::compose::pattern_verdicts(plan, winning_report(plan, 1.2), "r.json");
  EXPECT_EQ(accepted_count(slow), 0u);
  for (const auto& v : slow)
    if (!v.row.is_null()) EXPECT_NE(v.reason.find("does not beat"), std::string::npos) << v.reason;
}

TEST(ComposeGating, RejectedWinnersKeepPyTorchWithTheReason) {
  auto plan = minigpt_plan();
  json report = winning_report(plan, 0.5);
  ASSERT_TRUE(fact::compose::has_winners(report));
  std::string first_op = fact::compose::winning_op(report["rows"][0]);
  json one = fact::compose::reject_winners(report, {first_op}, "op_missing", "op missing from the op library");
  auto v1 = fact::compose::pattern_verdicts(plan, one, "r.json");
  EXPECT_EQ(accepted_count(v1), accepted_count(fact::compose::pattern_verdicts(plan, report, "r.json")) - 1);
  json all = fact::compose::reject_winners(report, {}, "ops_build_failed", "the op library did not build");
  EXPECT_FALSE(fact::compose::has_winners(all));
  auto v = fact::compose::pattern_verdicts(plan, all, "r.json");
  EXPECT_EQ(accepted_count(v), 0u);
  bool said = false;
  for (const auto& x : v) said |= x.reason.find("ops_build_failed: the op library did not build") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_EQ(all["rows"][0]["fact_ms"], 0.5);  // what was measured stays in the report
}

TEST(ComposeGating, EndToEndGateKeepsDropsOpsOrFallsBack) {
  EXPECT_EQ(fact::compose::gate_e2e(good_run(), 0, true).action, E2eGate::Action::keep);

  json slower = good_run();
  slower["composed_ms"] = 14.0;
  auto g = fact::compose::gate_e2e(slower, 0, true);
  EXPECT_EQ(g.action, E2eGate::Action::drop_all);
  EXPECT_NE(g.reason.find("slower"), std::string::npos) << g.reason;

  json wrong = good_run();
  wrong["correct"] = false;
  wrong["trials"] = json::array({{{"allclose_1e-2", false}, {"max_abs_diff", 3.5}}});
  g = fact::compose::gate_e2e(wrong, 1, true);
  EXPECT_EQ(g.action, E2eGate::Action::drop_all);
  EXPECT_NE(g.reason.find("KernelBench"), std::string::npos) << g.reason;

  json missing = {{"status", "ops_missing"}, {"missing_ops", {"gemm_x"}}, {"error", "OSError: undefined symbol"}};
  g = fact::compose::gate_e2e(missing, 4, true);
  EXPECT_EQ(g.action, E2eGate::Action::drop_ops);
  EXPECT_EQ(g.ops, std::vector<std::string>{"gemm_x"});
  EXPECT_NE(g.reason.find("undefined symbol"), std::string::npos);

  EXPECT_EQ(fact::compose::gate_e2e(nullptr, -1, true).action, E2eGate::Action::drop_all);  // crashed
  EXPECT_EQ(fact::compose::gate_e2e(slower, 0, false).action, E2eGate::Action::keep);      // nothing to drop
}

TEST(ComposeGating, ReportHasE2eFieldsPatternsAndTables) {
  auto plan = minigpt_plan();
  json e2e = fact::compose::e2e_summary(good_run(), nullptr, "");
  for (const char* k : {"correct", "eager_ms", "composed_ms", "compile_default_ms", "compile_max_autotune_ms",
                        "numerics", "rel_err_composed", "rel_err_original", "speedups"})
    EXPECT_TRUE(e2e.contains(k)) << k;
  EXPECT_DOUBLE_EQ(e2e["speedups"]["vs_eager"].get<double>(), 13.0 / 8.0);
  EXPECT_DOUBLE_EQ(e2e["speedups"]["vs_compile_default"].get<double>(), 6.0 / 8.0);
  // The best torch.compile is its CUDA-graph mode here (reduce-overhead), the counterpart of a graphed FACT module.
  EXPECT_DOUBLE_EQ(e2e["speedups"]["vs_best_compile"].get<double>(), 5.0 / 8.0);
  EXPECT_DOUBLE_EQ(e2e["compile_seconds"]["compile_reduce_overhead"].get<double>(), 45.0);
  EXPECT_TRUE(e2e["compile_max_autotune_ms"].is_null());
  EXPECT_EQ(e2e["variants"]["compile_max_autotune"]["error"], "BackendCompilerFailed: boom");
  EXPECT_FALSE(e2e["fallback"]["applied"].get<bool>());

  // Fallback: eager and composed from the fallback's run, torch.compile from the first run.
  json final_run = good_run();
  final_run["composed_ms"] = 13.1;
  final_run["variants"]["compile_default"] = {{"status", "skipped"}};
  json slow_first = good_run();
  slow_first["composed_ms"] = 20.0;
  json fb = fact::compose::e2e_summary(slow_first, final_run, "slower than the original");
  EXPECT_TRUE(fb["fallback"]["applied"].get<bool>());
  EXPECT_EQ(fb["fallback"]["rejected_composed_ms"], 20.0);
  EXPECT_EQ(fb["composed_ms"], 13.1);
  EXPECT_EQ(fb["compile_default_ms"], 6.0);

  auto verdicts = fact::compose::pattern_verdicts(plan, winning_report(plan, 0.5), "r.json");
  json rows = fact::compose::pattern_rows(plan, verdicts);
  ASSERT_EQ(rows.size(), plan.entries.size());
  for (const auto& r : rows)
    for (const char* k : {"rule", "anchor", "accepted", "why", "fact_ms", "pytorch_ms", "numerics", "rel_err"})
      EXPECT_TRUE(r.contains(k)) << k;

  json report = {{"model", "m.py"}, {"e2e", fb}, {"patterns", rows}, {"steps", json::array()},
                 {"chart", {{"file", "chart.png"}, {"note", ""}}}};
  std::string md = fact::compose::optimize_report_markdown(report);
  EXPECT_NE(md.find("Fell back to PyTorch's ops"), std::string::npos) << md;
  EXPECT_NE(md.find("| compile_max_autotune | failed: BackendCompilerFailed: boom |"), std::string::npos) << md;
  EXPECT_NE(md.find("## Patterns"), std::string::npos);
  EXPECT_NE(md.find("](chart.png)"), std::string::npos);
  EXPECT_EQ(md.find("Left to PyTorch"), std::string::npos) << "only a module that could not be traced says so";
  EXPECT_EQ(md.find("Replay of the composed module"), std::string::npos) << "said only where the check decided it";

  // The check's replay choice (op by op or one CUDA graph a call) travels into the summary and the report.
  json graphed_run = good_run();
  graphed_run["replay"] = {{"chosen", "cuda_graph"}, {"why", "one CUDA graph a call (1.41 ms vs 1.95 ms op by op)"}};
  json graphed = fact::compose::e2e_summary(graphed_run, nullptr, "");
  EXPECT_EQ(graphed["replay"]["chosen"], "cuda_graph");
  report["e2e"] = graphed;
  EXPECT_NE(fact::compose::optimize_report_markdown(report).find(
                "Replay of the composed module: one CUDA graph a call (1.41 ms vs 1.95 ms op by op)."),
            std::string::npos);

  json untraced = {{"model", "m.py"}, {"patterns", json::array()}, {"steps", json::array()},
                   {"left_to_pytorch", "the whole module: torch.export cannot trace Model.forward"}};
  EXPECT_NE(fact::compose::optimize_report_markdown(untraced)
                .find("**Left to PyTorch**: the whole module: torch.export cannot trace Model.forward"),
            std::string::npos);
  // The plan's notes (why a node stays PyTorch's) are listed under the patterns' summary.
  json noted = {{"model", "m.py"}, {"patterns", json::array()}, {"steps", json::array()},
                {"notes", {"aten.conv_transpose2d.input at node 'convt' stays PyTorch's: rule 'conv_transpose' needs "
                           "groups == 1 (groups = 4)"}}};
  EXPECT_NE(fact::compose::optimize_report_markdown(noted).find(
                "**Plan notes**:\n\n- aten.conv_transpose2d.input at node 'convt' stays PyTorch's"),
            std::string::npos);
}

// Normalization and attention winners are composed like GEMMs: their op is the family's config id, and the
// gates (faster than PyTorch, op missing at load time) drop them the same way.
TEST(ComposeGating, FamilyWinnersAreAcceptedUnderTheirConfigIdAndDroppedLikeGemms) {
  auto plan = minigpt_plan();
  json rows = json::array();
  for (const auto& e : plan.entries) {
    const auto& m = e.match;
    if (m.family == "gemm") continue;
    std::string id = (m.family == "attention" ? "attn_" : "norm_") + m.anchor;
    rows.push_back({{"pattern", m.rule}, {"anchor", m.anchor}, {"family", m.family}, {"status", "tuned"},
                    {"baseline", "torch"}, {"fact_ms", 0.5}, {"baseline_ms", 1.0}, {"winner", id},
                    {"config", {{"family", m.family}}}, {"problem", {{"eps", 1e-5}, {"scale", 0.1}, {"causal", true}}}});
  }
  json report = {{"format", "fact-tune-report"}, {"version", 1}, {"rows", rows}};
  ASSERT_EQ(rows.size(), 3u);  // 2 LayerNorms + the written-out attention
  EXPECT_EQ(fact::compose::winning_op(rows[0]), rows[0]["winner"].get<std::string>());
  auto v = fact::compose::pattern_verdicts(plan, report, "r.json");
  ASSERT_EQ(accepted_count(v), 3u);
  for (const auto& x : v) {
    if (!x.accepted) continue;
    EXPECT_EQ(x.op_name, x.row["winner"].get<std::string>());
    EXPECT_EQ(x.family, x.row["family"].get<std::string>());
  }
  // An op missing at load time keeps PyTorch's op for its pattern only.
  json dropped = fact::compose::reject_winners(report, {rows[1]["winner"].get<std::string>()}, "op_missing",
                                               "op missing");
  EXPECT_EQ(dropped["rows"][1]["rejected_op"], rows[1]["winner"]);
  EXPECT_EQ(accepted_count(fact::compose::pattern_verdicts(plan, dropped, "r.json")), 2u);
  // A family row without its problem (the composer reads eps / scale / causal from it) is not composed.
  json no_problem = report;
  no_problem["rows"][0].erase("problem");
  auto nv = fact::compose::pattern_verdicts(plan, no_problem, "r.json");
  EXPECT_EQ(accepted_count(nv), 2u);
  // A slower family kernel is rejected like a GEMM.
  json slow = report;
  for (auto& r : slow["rows"]) r["fact_ms"] = 1.5;
  EXPECT_EQ(accepted_count(fact::compose::pattern_verdicts(plan, slow, "r.json")), 0u);
}
