// The agent's decisions with the LLM and the verifier replaced by scripted doubles: staged refinement keeps
// the fastest verified kernel, feedback carries compiler errors and verification failures, profiles come
// only after a correct kernel, bad replies stop the loop, and the registry grows only on verified kernels
// and is matched by discover from then on.
#include <gtest/gtest.h>

#include <deque>
#include <filesystem>

#include "agent/kernel_refiner.h"
#include "agent/llm_agent.h"
#include "agent/stage_tools.h"
#include "discover/matcher.h"
#include "discover/user_registry.h"
#include "core/error.h"
#include "ir/ir_io.h"

namespace fs = std::filesystem;
using namespace fact;
using nlohmann::json;

namespace {

const ir::OpTable& ops() { return ir::OpTable::builtin(); }

discover::Plan swish_plan(const discover::PatternRegistry& registry) {
  auto graph = ir::load_graph(std::string(FACT_TEST_DATA) + "/agent/swish_absmax_ir.json", ops());
  return discover::make_plan(graph, registry, ops(), ArchSpec::builtin("sm90"), fact::Numerics::x3tf32);
}

json tool_call(const std::string& tool, const json& args) {
  return {{"role", "assistant"}, {"content", nullptr},
          {"tool_calls", json::array({{{"id", "c"}, {"type", "function"},
                                       {"function", {{"name", tool}, {"arguments", args.dump()}}}}})}};
}
// A kernel "source" whose markers tell the doubles what happens to it.
json kernel(const std::string& marker) {
  return tool_call("submit_kernel", {{"source", "int fact_swish_absmax_rows_run() {} // " + marker}, {"notes", marker}});
}
const json kPlan = tool_call("propose_patterns", {{"patterns", json::array({{{"name", "swish_absmax_rows"},
    {"nodes", {"sigmoid", "mul", "mul_1", "abs_1", "amax", "add", "div"}}, {"reason", "one pass"}}})}});

class ScriptedChat : public agent::ChatBackend {
 public:
  std::deque<json> replies;
  std::vector<json> requests;  // the messages of each request
  json complete(const json& messages, const json&) override {
    requests.push_back(messages);
    if (replies.empty()) throw Error("script exhausted");
    json r = replies.front();
    replies.pop_front();
    return r;
  }
  std::string model() const override { return "scripted"; }
};

// Real plan, cost model and registry; compile and verify decided by markers in the source:
// COMPILE_ERROR, MISMATCH, PASS_<microseconds>.
class ScriptedTools : public agent::StageTools {
 public:
  using StageTools::StageTools;
  int compiles = 0, verifies = 0;
  std::vector<discover::ExampleHit> retrieve_examples(const std::string&, size_t) const override { return {}; }
  agent::CompileResult compile(const agent::KernelCandidate& k) override {
    ++compiles;
    agent::CompileResult c;
    c.ok = k.source.find("COMPILE_ERROR") == std::string::npos;
    if (!c.ok) c.diagnostics = "kernel.cu(12): error: identifier \"block_reduce_max\" is undefined";
    c.library = "/nonexistent/lib.so";
    return c;
  }
  agent::Verdict verify(const agent::KernelCandidate& k, const agent::CompileResult&, const json&) override {
    ++verifies;
    agent::Verdict v;
    auto at = k.source.find("PASS_");
    if (at == std::string::npos) {
      v.status = "mismatch";
      v.message = "max|err|/max|ref| = 0.31 > 1e-05 (worst at row 3, col 17)";
      v.details = {{"max_rel_err", 0.31}, {"tolerance", 1e-5}};
      return v;
    }
    double us = std::stod(k.source.substr(at + 5));
    v.status = "passed";
    v.message = "ok";
    v.details = {{"max_rel_err", 1e-7}, {"tolerance", 1e-5}, {"profile", {{"kernel_us", us}, {"pytorch_us", 1000.0}}}};
    return v;
  }
};

struct AgentLoop : ::testing::Test {
  fs::path dir;
  void SetUp() override {
    dir = fs::temp_directory_path() / ("fact-agent-test-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::unique_ptr<ScriptedTools> tools(const discover::PatternRegistry& reg) {
    agent::StageToolsOptions o;
    o.work_dir = dir / "work";
    return std::make_unique<ScriptedTools>(swish_plan(reg), ArchSpec::builtin("sm90"),
                                           discover::UserRegistry(dir / "registry"), o);
  }
  agent::FragmentTask task(ScriptedTools& t) {
    auto f = discover::rowwise_candidates(t.plan()).at(0);
    return {"swish_absmax_rows", f, discover::fragment_to_json(t.plan().graph, f)};
  }
};

std::string last_feedback(const ScriptedChat& chat, size_t request) {
  return chat.requests.at(request).back().at("content").get<std::string>();
}

TEST_F(AgentLoop, RefineWalksStagesKeepsFastestVerifiedAndFeedsBackErrors) {
  auto t = tools(discover::PatternRegistry::builtin());
  ScriptedChat chat;
  chat.replies = {kernel("COMPILE_ERROR"), kernel("MISMATCH"), kernel("PASS_200"), kernel("PASS_150"),
                  kernel("MISMATCH"), kernel("PASS_170"), kernel("PASS_160")};
  auto out = agent::refine_kernel(chat, *t, task(*t), {{"role", "system"}, {"content", "s"}}, {});
  EXPECT_TRUE(out.verified);
  EXPECT_EQ(out.rounds, 7);
  EXPECT_EQ(out.stages_done, 4);
  EXPECT_NE(out.best.source.find("PASS_150"), std::string::npos);  // the fastest verified version wins
  EXPECT_EQ(t->compiles, 7);
  EXPECT_EQ(t->verifies, 6);
  // Round 2's prompt carries round 1's compiler error; round 3's the mismatch, without any profile.
  EXPECT_NE(last_feedback(chat, 1).find("block_reduce_max"), std::string::npos);
  EXPECT_NE(last_feedback(chat, 2).find("mismatch"), std::string::npos);
  EXPECT_EQ(last_feedback(chat, 2).find("Profile"), std::string::npos);
  EXPECT_EQ(chat.requests[1].back().at("role"), "tool");
  // After the first verified kernel: its profile, the roofline, and the next stage (tiling).
  std::string fb = last_feedback(chat, 3);
  EXPECT_NE(fb.find("Profile"), std::string::npos);
  EXPECT_NE(fb.find("\"kernel_us\":200"), std::string::npos);
  EXPECT_NE(fb.find("tiling"), std::string::npos);
  EXPECT_NE(fb.find("Roofline"), std::string::npos);
  // The first prompt is workload-aware: shape and arithmetic intensity.
  std::string first = chat.requests[0][1].at("content");
  EXPECT_NE(first.find("arithmetic_intensity"), std::string::npos);
  EXPECT_NE(first.find("16384"), std::string::npos);
  EXPECT_NE(first.find("FactRowwiseArgs"), std::string::npos);  // the ABI, from kernel_abi.h
}

TEST_F(AgentLoop, RefineStopsAfterUnusableRepliesAndAtTheRoundLimit) {
  auto t = tools(discover::PatternRegistry::builtin());
  ScriptedChat chat;
  chat.replies = {tool_call("submit_kernel", {{"notes", "forgot the source"}}), {{"role", "assistant"}, {"content", "```json\n{oops\n```"}},
                  tool_call("submit_kernel", {{"source", "no entry point"}, {"notes", "x"}})};
  auto out = agent::refine_kernel(chat, *t, task(*t), {{"role", "system"}, {"content", "s"}}, {});
  EXPECT_FALSE(out.verified);
  EXPECT_NE(out.stop_reason.find("3 unusable replies in a row"), std::string::npos);
  EXPECT_NE(out.stop_reason.find("fact_swish_absmax_rows_run"), std::string::npos);
  EXPECT_NE(last_feedback(chat, 1).find("missing the required field 'source'"), std::string::npos);
  EXPECT_EQ(t->compiles, 0);

  ScriptedChat chat2;
  chat2.replies = {kernel("MISMATCH"), kernel("MISMATCH")};
  agent::RefineOptions two;
  two.max_rounds = 2;
  auto out2 = agent::refine_kernel(chat2, *t, task(*t), {{"role", "system"}, {"content", "s"}}, two);
  EXPECT_FALSE(out2.verified);
  EXPECT_NE(out2.stop_reason.find("round limit (2)"), std::string::npos);
}

TEST_F(AgentLoop, RegistryGrowsOnlyOnVerifiedKernelsAndDiscoverMatchesItAfterwards) {
  // No kernel verifies: nothing is registered.
  {
    auto t = tools(discover::PatternRegistry::builtin());
    ScriptedChat chat;
    chat.replies = {kPlan, kernel("MISMATCH"), kernel("COMPILE_ERROR")};
    agent::LlmAgentOptions o;
    o.refine.max_rounds = 2;
    auto report = agent::make_llm_agent(chat, o)->run(*t);
    EXPECT_FALSE(report.ok);
    EXPECT_TRUE(report.registered.empty());
    EXPECT_TRUE(discover::UserRegistry(dir / "registry").list().empty());
  }
  // A plan naming nodes that do not form one chain is sent back; then a verified kernel is registered.
  {
    auto t = tools(discover::PatternRegistry::builtin());
    ScriptedChat chat;
    json bad = tool_call("propose_patterns", {{"patterns", json::array({{{"name", "swish_absmax_rows"},
        {"nodes", {"sigmoid", "div"}}, {"reason", "r"}}})}});
    chat.replies = {bad, kPlan, kernel("PASS_180")};
    agent::LlmAgentOptions o;
    o.refine.max_rounds = 1;
    auto report = agent::make_llm_agent(chat, o)->run(*t);
    ASSERT_EQ(report.registered, std::vector<std::string>{"swish_absmax_rows"});
    EXPECT_NE(last_feedback(chat, 1).find("must have one output"), std::string::npos);
  }
  discover::UserRegistry reg(dir / "registry");
  auto entry = reg.get("swish_absmax_rows");
  EXPECT_EQ(entry.record["verification"]["passed"], true);
  EXPECT_EQ(entry.record["arch"], "sm90");
  EXPECT_NE(entry.kernel_source.find("PASS_180"), std::string::npos);
  // Discover (data/rules + registry) now covers the whole chain with the registered rule.
  auto rules = discover::PatternRegistry::builtin();
  for (auto& r : reg.rules()) rules.add(std::move(r));
  auto t2 = tools(rules);
  ASSERT_EQ(t2->plan().entries.size(), 1u);
  EXPECT_EQ(t2->plan().entries[0].match.rule, "swish_absmax_rows");
  EXPECT_EQ(t2->plan().entries[0].match.nodes.size(), 7u);
  EXPECT_EQ(t2->plan().entries[0].match.dims.at("rows"), 16384);
  // A second agent run reuses it: no LLM call, the stored kernel compiled and verified again.
  ScriptedChat none;
  auto report = agent::make_llm_agent(none, {})->run(*t2);
  EXPECT_TRUE(report.ok);
  EXPECT_TRUE(none.requests.empty());
  EXPECT_EQ(report.reused, std::vector<std::string>{"swish_absmax_rows"});
  EXPECT_EQ(t2->verifies, 1);
}

TEST_F(AgentLoop, BuiltinPlannerNamesTheUncoveredChainAndCallsNoTool) {
  auto t = tools(discover::PatternRegistry::builtin());
  auto report = agent::make_builtin_planner()->run(*t);
  EXPECT_TRUE(report.ok);
  EXPECT_EQ(t->compiles, 0);
  // The chain no rule covers is a plan entry with a kernel generated from the IR, not left to PyTorch.
  ASSERT_EQ(report.lines.size(), 1u);
  EXPECT_NE(report.lines[0].find("generated row-wise kernel for div (7 ops: aten.sigmoid.default"), std::string::npos)
      << report.lines[0];
}

}  // namespace
