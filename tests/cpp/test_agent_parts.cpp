// The agent's parts on their own: reply schema checks, row-wise fragments and their rules, the user registry.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "agent/reply_schema.h"
#include "discover/rowwise_fragment.h"
#include "core/error.h"
#include "discover/matcher.h"
#include "discover/user_registry.h"
#include "ir/ir_io.h"

namespace fs = std::filesystem;
using namespace fact;
using nlohmann::json;

namespace {

const ir::OpTable& ops() { return ir::OpTable::builtin(); }
ir::Graph swish_graph() { return ir::load_graph(std::string(FACT_TEST_DATA) + "/agent/swish_absmax_ir.json", ops()); }

std::string reply_error(const json& message, const std::string& tool) {
  try {
    agent::reply_arguments(message, tool, agent::load_tool(tool).at("parameters"));
  } catch (const agent::ReplyError& e) {
    return e.what();
  }
  return "";
}

TEST(AgentReplySchema, AcceptsToolCallsAndFencedJsonRejectsWithReasons) {
  json good = {{"patterns", json::array({{{"name", "a_b"}, {"nodes", {"x"}}, {"reason", "r"}}})}};
  json call = {{"tool_calls", json::array({{{"id", "1"}, {"function", {{"name", "propose_patterns"}, {"arguments", good.dump()}}}}})}};
  EXPECT_EQ(reply_error(call, "propose_patterns"), "");
  EXPECT_EQ(agent::reply_arguments(call, "propose_patterns", agent::load_tool("propose_patterns")["parameters"]), good);
  json fenced = {{"content", "Here:\n```json\n" + good.dump() + "\n```\n"}};
  EXPECT_EQ(reply_error(fenced, "propose_patterns"), "");
  EXPECT_NE(reply_error({{"content", "{not json"}}, "propose_patterns").find("not valid JSON"), std::string::npos);
  json bad_name = {{"patterns", json::array({{{"name", "Bad-Name"}, {"nodes", {"x"}}, {"reason", "r"}}})}};
  EXPECT_NE(reply_error({{"content", bad_name.dump()}}, "propose_patterns").find("arguments.patterns[0].name"), std::string::npos);
  json extra = {{"patterns", json::array()}, {"also", 1}};
  EXPECT_NE(reply_error({{"content", extra.dump()}}, "propose_patterns").find("unknown field 'also'"), std::string::npos);
  json wrong_type = {{"patterns", "all"}};
  EXPECT_NE(reply_error({{"content", wrong_type.dump()}}, "propose_patterns").find("must be an array"), std::string::npos);
  json other_tool = {{"tool_calls", json::array({{{"function", {{"name", "submit_kernel"}, {"arguments", "{}"}}}}})}};
  EXPECT_NE(reply_error(other_tool, "propose_patterns").find("calls submit_kernel"), std::string::npos);
  EXPECT_NE(reply_error(json::object(), "submit_kernel").find("neither"), std::string::npos);
}

TEST(AgentRowwiseFragment, FindsTheChainChecksProposalsAndWritesAMatchingRule) {
  auto g = swish_graph();
  std::vector<std::string> chain = {"sigmoid", "mul", "mul_1", "abs_1", "amax", "add", "div"};
  auto f = discover::make_rowwise_fragment(g, chain, {});
  EXPECT_EQ(f.output, "div");
  EXPECT_EQ(f.inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(f.rows, 16384);
  EXPECT_EQ(f.cols, 4096);
  auto err = [&](std::vector<std::string> nodes, std::set<std::string> covered = {}) {
    try {
      discover::make_rowwise_fragment(g, nodes, covered);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err({"sigmoid", "div"}).find("one output"), std::string::npos);
  EXPECT_NE(err({"sigmoid", "mul", "mul_1", "abs_1"}).find("used outside"), std::string::npos);
  EXPECT_NE(err({"nope"}).find("'nope' is not in the graph"), std::string::npos);
  EXPECT_NE(err({"x"}).find("not an op"), std::string::npos);
  EXPECT_NE(err(chain, {"amax"}).find("already covered"), std::string::npos);

  json rule = discover::fragment_rule(g, f, "swish_absmax_rows", "sm90", "test");
  discover::PatternRegistry reg;
  reg.add(discover::parse_rule(rule, "generated rule"));
  auto matches = discover::find_all_matches(g, reg, ops(), ArchSpec::builtin("sm90"));
  ASSERT_EQ(matches.size(), 1u);
  EXPECT_EQ(matches[0].anchor, "div");
  EXPECT_EQ(matches[0].inputs.at("$in0"), "x");
  EXPECT_EQ(matches[0].kernel["registry_entry"], "swish_absmax_rows");
  // Verified at cols = 4096 only: another row length does not match.
  json other = rule;
  other["constraints"][0] = "cols == 2048";
  discover::PatternRegistry reg2;
  reg2.add(discover::parse_rule(other, "generated rule"));
  EXPECT_TRUE(discover::find_all_matches(g, reg2, ops(), ArchSpec::builtin("sm90")).empty());
}

TEST(AgentUserRegistry, AddsOnlyVerifiedEntriesListsShowsExportsAndFeedsDiscover) {
  fs::path root = fs::temp_directory_path() / ("fact-registry-test-" + std::to_string(::getpid()));
  fs::remove_all(root);
  discover::UserRegistry reg(root);
  EXPECT_TRUE(reg.list().empty());
  auto g = swish_graph();
  auto f = discover::make_rowwise_fragment(g, {"sigmoid", "mul", "mul_1", "abs_1", "amax", "add", "div"}, {});
  json rule = discover::fragment_rule(g, f, "swish_absmax_rows", "sm90", "test");
  json record = {{"arch", "sm90"}, {"dtype", "float32"}, {"numerics", "3xtf32"},
                 {"kernel", {{"source_file", "kernel.cu"}}}, {"verification", {{"passed", false}}}};
  EXPECT_THROW(reg.add(rule, record, "src"), Error);
  EXPECT_TRUE(reg.list().empty());
  record["verification"]["passed"] = true;
  reg.add(rule, record, "// kernel\n");
  auto entries = reg.list();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].kernel_source, "// kernel\n");
  try {
    reg.get("other");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds: swish_absmax_rows"), std::string::npos);
  }
  auto exported = reg.export_to(root / "export");
  ASSERT_EQ(exported.size(), 1u);
  EXPECT_TRUE(fs::exists(exported[0] / "kernel.cu"));
  json bad = rule;
  bad["name"] = "Bad Name";
  EXPECT_THROW(reg.add(bad, record, "x"), Error);

  ::setenv("FACT_REGISTRY", root.c_str(), 1);
  auto all = discover::builtin_and_user_rules();
  ::unsetenv("FACT_REGISTRY");
  EXPECT_NE(all.find("swish_absmax_rows"), nullptr);
  EXPECT_NE(all.find("gemm"), nullptr);
  fs::remove_all(root);
}

}  // namespace
