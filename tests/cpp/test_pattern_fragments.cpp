// Pattern fragments (data/rules/fragments): a use expands to the written-out nodes, renames vars and inner
// nodes, and each misuse fails with an Error naming the rule, the node and the fragment.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "core/arch_spec.h"
#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "discover/matcher.h"
#include "discover/pattern_fragments.h"
#include "discover/pattern_registry.h"
#include "ir_test_graphs.h"

namespace fs = std::filesystem;
using fact::discover::FragmentLibrary;
using fact::test::GraphDoc;
using fact::test::ref_to;
using Json = nlohmann::json;

namespace {

// linear($a, $b, $bias?) or addmm($bias, $a, $b), as the GEMM rules write it.
const Json kLinearNode = Json::parse(R"({"id": "gemm", "alternatives": [
  {"op": "aten.linear.default", "args": ["$a", "$b", {"var": "$bias", "nullable": true, "default": null}],
   "attrs": {"form": "linear", "b_layout": "nk"}},
  {"op": "aten.addmm.default", "args": ["$bias", "$a", "$b"],
   "kwargs": {"beta": {"const": 1, "default": 1}, "alpha": {"const": 1, "default": 1}},
   "attrs": {"form": "addmm", "b_layout": "kn"}}]})");

// relu(x) or x * sigmoid(x)-like two-node fragment: the output reads an inner node.
const Json kTwoNodes = Json::parse(R"({"description": "test", "output": "act", "nodes": [
  {"id": "act", "alternatives": [{"op": "aten.relu.default", "args": ["$x"]},
                                 {"op": "aten.mul.Tensor", "args": ["$x", "sig"]}]},
  {"id": "sig", "op": "aten.sigmoid.default", "args": ["$x"]}]})");

// A folder of fragment files, removed with the test.
class FragmentDir {
 public:
  explicit FragmentDir(const std::string& test) {
    dir_ = fs::temp_directory_path() / ("fact-fragments-test-" + std::to_string(::getpid())) / test;
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~FragmentDir() { fs::remove_all(dir_); }
  FragmentDir& put(const std::string& name, const Json& doc) { return put_text(name, doc.dump(1)); }
  FragmentDir& put_text(const std::string& name, const std::string& text) {
    fact::write_file_atomic(dir_ / (name + ".json"), text);
    return *this;
  }
  FragmentLibrary library() const { return FragmentLibrary::load(dir_); }
  const fs::path& path() const { return dir_; }

 private:
  fs::path dir_;
};

Json fragment_of(const Json& node) {
  return {{"description", "test"}, {"nodes", {node}}, {"output", node["id"]}};
}

// A rule whose pattern is `nodes` (output `output`), parsed with `lib`.
Json parse_pattern(const Json& nodes, const std::string& output, const FragmentLibrary& lib) {
  Json r = {{"name", "t"}, {"description", "test"}, {"family", "test"}, {"dtypes", {"float32"}}, {"archs", {"sm90"}},
            {"pattern", {{"nodes", nodes}, {"output", output}}}, {"kernel", {{"family", "test"}}}};
  return fact::discover::parse_rule(r, "rules/t.json", lib).pattern;
}

// The Error message of parsing that pattern; fails the test when parsing succeeds.
std::string error_of(const Json& nodes, const std::string& output, const FragmentLibrary& lib) {
  try {
    parse_pattern(nodes, output, lib);
  } catch (const fact::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "parsed without error: " << nodes.dump();
  return "";
}

std::string load_error(const FragmentDir& d) {
  try {
    d.library();
  } catch (const fact::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "fragments in " << d.path() << " loaded without error";
  return "";
}

}  // namespace

TEST(PatternFragments, UseExpandsToTheWrittenOutNode) {
  FragmentDir d("same");
  d.put("lin", fragment_of(kLinearNode));
  Json relu = {{"id", "act"}, {"op", "aten.relu.default"}, {"args", Json::array({"gemm"})}};
  Json used = parse_pattern({{{"id", "gemm"}, {"fragment", "lin"}}, relu}, "act", d.library());
  Json written = parse_pattern({kLinearNode, relu}, "act", d.library());
  EXPECT_EQ(used, written);
  EXPECT_EQ(used["nodes"][0], kLinearNode);

  // And it matches the same way: linear(x, w, b) -> relu.
  GraphDoc g;
  g.input("x", {8, 16}).input("w", {32, 16}, "float32", "parameter").input("b", {32}, "float32", "parameter");
  g.op("lin", "aten.linear.default", {ref_to("x"), ref_to("w"), ref_to("b")}, {8, 32});
  g.op("r", "aten.relu.default", {ref_to("lin")}, {8, 32}).output("r");
  auto match = [&](const Json& pattern) {
    fact::discover::PatternRegistry reg;
    Json r = {{"name", "t"}, {"description", "test"}, {"family", "test"}, {"dtypes", {"float32"}},
              {"archs", {"sm90"}}, {"pattern", pattern}, {"kernel", {{"family", "test"}}}};
    reg.add(fact::discover::parse_rule(r, "rules/t.json", d.library()));
    auto ms = fact::discover::find_all_matches(g.graph(), reg, fact::ir::OpTable::builtin(),
                                               fact::ArchSpec::builtin("sm90"));
    return ms;
  };
  auto a = match({{"nodes", {{{"id", "gemm"}, {"fragment", "lin"}}, relu}}, {"output", "act"}});
  auto b = match(written);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].nodes, (std::vector<std::string>{"lin", "r"}));
  EXPECT_EQ(a[0].nodes, b[0].nodes);
  EXPECT_EQ(a[0].inputs, b[0].inputs);
  EXPECT_EQ(a[0].attrs, b[0].attrs);
  EXPECT_EQ(a[0].inputs.at("$bias"), "b");
  EXPECT_EQ(a[0].attrs.at("form"), "linear");
}

TEST(PatternFragments, VarsRenameEachUseApart) {
  FragmentDir d("vars");
  d.put("lin", fragment_of(kLinearNode)).put("act", kTwoNodes);
  Json nodes = Json::parse(R"([
    {"id": "gate", "fragment": "lin", "vars": {"$b": "$wg", "$bias": "$bg"}},
    {"id": "a", "fragment": "act", "vars": {"$x": "gate"}},
    {"id": "up", "fragment": "lin", "vars": {"$b": "$wu", "$bias": "$bu"}},
    {"id": "out", "op": "aten.mul.Tensor", "args": ["a", "up"]}])");
  Json p = parse_pattern(nodes, "out", d.library());
  ASSERT_EQ(p["nodes"].size(), 5u);
  std::vector<std::string> ids;
  for (const auto& n : p["nodes"]) ids.push_back(n["id"]);
  EXPECT_EQ(ids, (std::vector<std::string>{"gate", "a", "sig", "up", "out"}));
  const Json& gate = p["nodes"][0]["alternatives"];
  EXPECT_EQ(gate[0]["args"], Json::parse(R"(["$a", "$wg", {"var": "$bg", "nullable": true, "default": null}])"));
  EXPECT_EQ(gate[1]["args"], Json::parse(R"(["$bg", "$a", "$wg"])"));
  EXPECT_EQ(p["nodes"][3]["alternatives"][0]["args"][1], "$wu");
  EXPECT_EQ(p["nodes"][3]["alternatives"][1]["args"][0], "$bu");
  // A $var renamed to a node id reads that node; the output takes the use's id.
  EXPECT_EQ(p["nodes"][1]["alternatives"][1]["args"], Json::parse(R"(["gate", "sig"])"));
  EXPECT_EQ(p["nodes"][2]["args"], Json::parse(R"(["gate"])"));
}

TEST(PatternFragments, IdsRenameInnerNodesAndTheUseSetsOptional) {
  FragmentDir d("ids");
  d.put("act", kTwoNodes);
  Json nodes = Json::parse(R"([
    {"id": "first", "fragment": "act", "vars": {"$x": "$in"}},
    {"id": "second", "fragment": "act", "vars": {"$x": "first"}, "ids": {"sig": "sig2"},
     "optional": true, "passthrough": "first"},
    {"id": "out", "op": "aten.neg.default", "args": ["second"]}])");
  Json p = parse_pattern(nodes, "out", d.library());
  ASSERT_EQ(p["nodes"].size(), 5u);
  EXPECT_EQ(p["nodes"][2]["id"], "second");
  EXPECT_EQ(p["nodes"][2]["alternatives"][1]["args"], Json::parse(R"(["first", "sig2"])"));
  EXPECT_EQ(p["nodes"][3]["id"], "sig2");
  EXPECT_EQ(p["nodes"][2]["optional"], true);
  EXPECT_EQ(p["nodes"][2]["passthrough"], "first");
  EXPECT_FALSE(p["nodes"][3].contains("optional"));
  // Without the rename, the second use's "sig" collides with the first's.
  Json clash = nodes;
  clash[1].erase("ids");
  std::string e = error_of(clash, "out", d.library());
  EXPECT_NE(e.find("'second' (fragment 'act') brings node 'sig'"), std::string::npos) << e;
}

TEST(PatternFragments, OneNodeFragmentSplicesIntoAlternatives) {
  FragmentDir d("splice");
  d.put("lin", fragment_of(kLinearNode));
  d.put("any", Json::parse(R"({"description": "test", "output": "g", "nodes": [{"id": "g", "alternatives": [
    {"fragment": "lin"}, {"op": "aten.mm.default", "args": ["$a", "$b"], "attrs": {"form": "mm"}}]}]})"));
  Json p = parse_pattern(Json::parse(R"([{"id": "gemm", "fragment": "any", "vars": {"$a": "$x"}}])"), "gemm",
                         d.library());
  const Json& forms = p["nodes"][0]["alternatives"];
  ASSERT_EQ(forms.size(), 3u);
  EXPECT_EQ(forms[0]["op"], "aten.linear.default");
  EXPECT_EQ(forms[0]["args"][0], "$x");
  EXPECT_EQ(forms[1]["args"], Json::parse(R"(["$bias", "$x", "$b"])"));
  EXPECT_EQ(forms[2]["op"], "aten.mm.default");
  EXPECT_EQ(forms[2]["args"][0], "$x");
}

TEST(PatternFragments, MisusesNameTheRuleNodeAndFragment) {
  FragmentDir d("misuse");
  d.put("lin", fragment_of(kLinearNode)).put("act", kTwoNodes);
  auto lib = d.library();
  auto expect_error = [&](const char* nodes, const std::vector<std::string>& needles) {
    std::string e = error_of(Json::parse(nodes), "gemm", lib);
    for (const auto& n : needles) EXPECT_NE(e.find(n), std::string::npos) << "'" << n << "' not in: " << e;
  };
  expect_error(R"([{"id": "gemm", "fragment": "linn"}])",
               {"rules/t.json", "pattern node 'gemm'", "fragment 'linn'", "it holds: act, lin"});
  expect_error(R"([{"id": "gemm", "fragment": "lin", "vars": {"$c": "$x"}}])",
               {"rules/t.json", "pattern node 'gemm' (fragment 'lin')", "renames '$c'", "$a, $b, $bias"});
  expect_error(R"([{"id": "gemm", "fragment": "lin", "vars": {"$bias": "other"}}, {"id": "other", "op": "aten.relu.default", "args": ["$y"]}])",
               {"(fragment 'lin')", "maps $bias to node 'other'", "{\"var\": ...}"});
  expect_error(R"([{"id": "gemm", "fragment": "act", "ids": {"act": "x"}}])",
               {"(fragment 'act')", "renames node 'act'", "its inner nodes: sig"});
  expect_error(R"([{"id": "gemm", "fragment": "lin", "op": "aten.mm.default"}])",
               {"(fragment 'lin')", "field 'op'"});
  expect_error(R"([{"id": "gemm", "alternatives": [{"fragment": "act"}]}])",
               {"pattern node 'gemm' alternatives[0] (fragment 'act')", "one-node fragment"});
  // A rename to a node the rule does not have is caught by the pattern check, as a written-out arg would be.
  expect_error(R"([{"id": "gemm", "fragment": "lin", "vars": {"$a": "nope"}}])", {"'nope'", "no pattern node id"});
}

TEST(PatternFragments, MalformedFragmentFilesNameTheFile) {
  {
    FragmentDir d("not_json");
    d.put("lin", fragment_of(kLinearNode)).put_text("broken", "{ not json");
    std::string e = load_error(d);
    EXPECT_NE(e.find("broken.json"), std::string::npos) << e;
  }
  {
    FragmentDir d("no_output");
    Json f = fragment_of(kLinearNode);
    f.erase("output");
    d.put("lin", f);
    std::string e = load_error(d);
    EXPECT_NE(e.find("fragment file '"), std::string::npos) << e;
    EXPECT_NE(e.find("lin.json"), std::string::npos) << e;
    EXPECT_NE(e.find("'output'"), std::string::npos) << e;
  }
  {
    FragmentDir d("bad_field");
    Json node = kLinearNode;
    node["alternatives"][0].erase("op");
    d.put("lin", fragment_of(node));
    std::string e = load_error(d);
    EXPECT_NE(e.find("lin.json"), std::string::npos) << e;
    EXPECT_NE(e.find("alternatives[0] is missing field 'op'"), std::string::npos) << e;
  }
  {
    FragmentDir d("outside_ref");  // a fragment reaches rule nodes only through a $var the use renames
    d.put("lin", fragment_of(Json::parse(R"({"id": "r", "op": "aten.relu.default", "args": ["gemm"]})")));
    std::string e = load_error(d);
    EXPECT_NE(e.find("names 'gemm', which is no pattern node id"), std::string::npos) << e;
  }
  {
    FragmentDir d("cycle");
    d.put("a", fragment_of(Json::parse(R"({"id": "n", "alternatives": [{"fragment": "b"}]})")));
    d.put("b", fragment_of(Json::parse(R"({"id": "n", "alternatives": [{"fragment": "a"}]})")));
    std::string e = load_error(d);
    EXPECT_NE(e.find("inside itself"), std::string::npos) << e;
  }
}

TEST(PatternFragments, RegistryLoadsRulesNotFragments) {
  FragmentDir d("registry");
  fs::path rules = d.path() / "rules";
  fs::create_directories(rules / "fragments");
  fact::write_file_atomic(rules / "fragments" / "lin.json", fragment_of(kLinearNode).dump());
  Json rule = {{"name", "lin_relu"}, {"description", "test"}, {"family", "test"}, {"dtypes", {"float32"}},
               {"archs", {"sm90"}}, {"kernel", {{"family", "test"}}},
               {"pattern", Json::parse(R"({"nodes": [{"id": "gemm", "fragment": "lin"},
                 {"id": "act", "op": "aten.relu.default", "args": ["gemm"]}], "output": "act"})")}};
  fact::write_file_atomic(rules / "lin_relu.json", rule.dump());
  auto reg = fact::discover::PatternRegistry::load(rules);
  ASSERT_EQ(reg.rules().size(), 1u);
  EXPECT_EQ(reg.rules()[0].pattern["nodes"][0], kLinearNode);

  // A folder without fragments/ (rules copied out of data/rules) uses data/rules/fragments.
  fs::path copied = d.path() / "copied";
  fs::create_directories(copied);
  fs::copy_file(fact::data_dir() / "rules" / "gemm_swiglu.json", copied / "gemm_swiglu.json");
  auto swiglu = fact::discover::PatternRegistry::load(copied);
  ASSERT_EQ(swiglu.rules().size(), 1u);
  EXPECT_EQ(swiglu.rules()[0].pattern, fact::discover::PatternRegistry::builtin().find("gemm_swiglu")->pattern);
}

TEST(PatternFragments, BuiltinRulesUseTheBuiltinFragments) {
  auto reg = fact::discover::PatternRegistry::builtin();
  EXPECT_EQ(reg.find("linear_or_addmm"), nullptr);  // a fragment is no rule
  const auto* swiglu = reg.find("gemm_swiglu");
  ASSERT_NE(swiglu, nullptr);
  std::vector<std::string> ids;
  for (const auto& n : swiglu->pattern["nodes"]) ids.push_back(n["id"]);
  EXPECT_EQ(ids, (std::vector<std::string>{"gate", "act", "sig", "up", "out"}));
  Json up = kLinearNode;
  up["id"] = "up";
  up["alternatives"][0]["args"] = Json::parse(R"(["$a", "$wu", {"var": "$bu", "nullable": true, "default": null}])");
  up["alternatives"][1]["args"] = Json::parse(R"(["$bu", "$a", "$wu"])");
  EXPECT_EQ(swiglu->pattern["nodes"][3], up);
  const auto* gemm = reg.find("gemm");
  ASSERT_NE(gemm, nullptr);
  const Json& forms = gemm->pattern["nodes"][0]["alternatives"];
  ASSERT_EQ(forms.size(), 4u);
  EXPECT_EQ(forms[0], kLinearNode["alternatives"][0]);
  EXPECT_EQ(forms[1], kLinearNode["alternatives"][1]);
}
