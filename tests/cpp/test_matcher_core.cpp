// The matcher's features on small graphs with rules written in the test, and the expression language.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/arch_spec.h"
#include "discover/matcher.h"
#include "discover/pattern_registry.h"
#include "discover/shape_expr.h"
#include "ir_test_graphs.h"

using fact::discover::Match;
using fact::test::GraphDoc;
using fact::test::ref_to;
using Json = nlohmann::json;

namespace {

fact::discover::PatternRegistry registry_of(const std::vector<Json>& rules) {
  fact::discover::PatternRegistry reg;
  for (const auto& r : rules) reg.add(fact::discover::parse_rule(r, "test rule"));
  return reg;
}

Json rule(const std::string& name, Json nodes, const std::string& output, Json extra = Json::object()) {
  Json r = {{"name", name}, {"description", "test"}, {"family", "test"}, {"dtypes", {"float32"}},
            {"archs", {"sm90"}}, {"pattern", {{"nodes", nodes}, {"output", output}}}, {"kernel", {{"family", "test"}}}};
  for (auto& [k, v] : extra.items()) r[k] = v;
  return r;
}

std::vector<Match> matches(const GraphDoc& d, const std::vector<Json>& rules) {
  return fact::discover::find_all_matches(d.graph(), registry_of(rules), fact::ir::OpTable::builtin(),
                                          fact::ArchSpec::builtin("sm90"));
}

double eval(const std::string& text) {
  fact::discover::ExprContext ctx;
  static fact::ir::TensorMeta t{{2, 3, 4}, {12, 4, 1}, "float32"};
  ctx.name = [](const std::string& n) -> std::optional<double> {
    if (n == "M") return 300;
    if (n == "sm_count") return 132;
    return std::nullopt;
  };
  ctx.tensor = [](const std::string& r) -> const fact::ir::TensorMeta* { return r == "$x" ? &t : nullptr; };
  return fact::discover::ShapeExpr::parse(text).eval(ctx);
}

// relu(add(x, y)) with `add` used once more when `extra_use` is set.
GraphDoc add_relu(bool extra_use, const std::string& dtype = "float32") {
  GraphDoc d;
  d.input("x", {4, 8}, dtype).input("y", {4, 8}, dtype);
  d.op("add", "aten.add.Tensor", {ref_to("y"), ref_to("x")}, {4, 8}, dtype);
  d.op("relu", "aten.relu.default", {ref_to("add")}, {4, 8}, dtype);
  d.output("relu");
  if (extra_use) d.output("add");
  return d;
}

const Json kAddRelu = rule("add_relu",
                           {{{"id", "sum"}, {"op", "aten.add.Tensor"}, {"args", {"$a", "$b"}}},
                            {{"id", "act"}, {"op", "aten.relu.default"}, {"args", {"sum"}}}},
                           "act", {{"dims", {{"rows", "$a.shape[0]"}, {"total", "rows * $b.shape[-1]"}}}});

}  // namespace

TEST(MatcherExpr, ArithmeticLogicAndAccessors) {
  EXPECT_EQ(eval("1 + 2 * 3"), 7);
  EXPECT_EQ(eval("(1 + 2) * 3"), 9);
  EXPECT_EQ(eval("7 / 2"), 3.5);
  EXPECT_EQ(eval("7 // 2"), 3);
  EXPECT_EQ(eval("7 % 3"), 1);
  EXPECT_EQ(eval("ceil_div(M, 128)"), 3);
  EXPECT_EQ(eval("min(4, 2, 9) + max(1, 5)"), 7);
  EXPECT_EQ(eval("$x.shape[-1] * $x.shape[0]"), 8);
  EXPECT_EQ(eval("$x.rank"), 3);
  EXPECT_EQ(eval("numel($x)"), 24);
  EXPECT_EQ(eval("has($x) and not has($y)"), 1);
  EXPECT_EQ(eval("M < sm_count / 2 or M >= 300"), 1);
  EXPECT_EQ(eval("M == 300 and -1 < 0 and 2 != 2"), 0);
  EXPECT_EQ(eval("has($y) and $y.rank == 2"), 0);  // `and` guards the unbound accessor
  EXPECT_EQ(eval("1e-6 < 0.001"), 1);
}

TEST(MatcherExpr, ErrorsNameTheExpression) {
  EXPECT_THROW(fact::discover::ShapeExpr::parse("1 +"), fact::Error);
  EXPECT_THROW(fact::discover::ShapeExpr::parse("foo(1)"), fact::Error);
  EXPECT_THROW(fact::discover::ShapeExpr::parse("$x.size"), fact::Error);
  try {
    eval("N * 2");
    FAIL();
  } catch (const fact::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'N * 2'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(eval("$x.shape[3]"), fact::Error);
  EXPECT_THROW(eval("$y.rank"), fact::Error);
  EXPECT_THROW(eval("M // 0"), fact::Error);
}

TEST(MatcherCore, CommutativeOpMatchesEitherOrderAndFillsTheMatch) {
  auto ms = matches(add_relu(false), {kAddRelu});
  ASSERT_EQ(ms.size(), 1u);
  const Match& m = ms[0];
  EXPECT_EQ(m.rule, "add_relu");
  EXPECT_EQ(m.family, "test");
  EXPECT_EQ(m.anchor, "relu");
  EXPECT_EQ(m.nodes, (std::vector<std::string>{"add", "relu"}));
  EXPECT_EQ(m.inputs.at("$a"), "y");
  EXPECT_EQ(m.dims.at("total"), 32);
  EXPECT_EQ(m.dtype, "float32");
  EXPECT_EQ(m.kernel.at("family"), "test");

  // sub is not commutative: with the rule's variables pinned to x then y, only one order fits.
  GraphDoc d;
  d.input("x", {4}).input("y", {4}).op("sub", "aten.sub.Tensor", {ref_to("y"), ref_to("x")}, {4}).output("sub");
  Json same_var = rule("sub_same", {{{"id", "s"}, {"op", "aten.sub.Tensor"}, {"args", {"$a", "$a"}}}}, "s");
  EXPECT_TRUE(matches(d, {same_var}).empty());  // $a twice must bind the same value
}

TEST(MatcherCore, IntermediateWithOutsideUserBlocksTheMatch) {
  EXPECT_TRUE(matches(add_relu(true), {kAddRelu}).empty());
}

// A rule may let an intermediate escape by naming it in pattern.extra_outputs: the match then records it
// (when something outside reads it), and the fused op returns it beside the anchor's value.
TEST(MatcherCore, ExtraOutputMayBeReadOutsideAfterTheAnchor) {
  Json exported = kAddRelu;
  exported["pattern"]["extra_outputs"] = {"sum"};
  auto alone = matches(add_relu(false), {exported});
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_TRUE(alone[0].extra_outputs.empty());  // nobody else reads the sum: it is not written
  auto read_again = matches(add_relu(true), {exported});  // the sum is also a graph output
  ASSERT_EQ(read_again.size(), 1u);
  EXPECT_EQ(read_again[0].nodes, (std::vector<std::string>{"add", "relu"}));
  EXPECT_EQ(read_again[0].extra_outputs, (std::map<std::string, std::string>{{"sum", "add"}}));

  // Read by an op after the anchor: fine. Read by an op before the anchor: the fused op (at the anchor)
  // would come too late for it, so no match.
  auto reader = [](bool before_anchor) {
    GraphDoc d;
    d.input("x", {4, 8}).input("y", {4, 8});
    d.op("add", "aten.add.Tensor", {ref_to("x"), ref_to("y")}, {4, 8});
    if (before_anchor) d.op("neg", "aten.neg.default", {ref_to("add")}, {4, 8});
    d.op("relu", "aten.relu.default", {ref_to("add")}, {4, 8});
    if (!before_anchor) d.op("neg", "aten.neg.default", {ref_to("add")}, {4, 8});
    d.op("out", "aten.add.Tensor", {ref_to("relu"), ref_to("neg")}, {4, 8}).output("out");
    return d;
  };
  auto after = matches(reader(false), {exported});
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].extra_outputs.at("sum"), "add");
  EXPECT_TRUE(matches(reader(true), {exported}).empty());

  // Other intermediates stay private: add -> neg -> relu with only `sum` exported, neg read outside.
  Json three = rule("add_neg_relu",
                    {{{"id", "sum"}, {"op", "aten.add.Tensor"}, {"args", {"$a", "$b"}}},
                     {{"id", "n"}, {"op", "aten.neg.default"}, {"args", {"sum"}}},
                     {{"id", "act"}, {"op", "aten.relu.default"}, {"args", {"n"}}}},
                    "act");
  three["pattern"]["extra_outputs"] = {"sum"};
  GraphDoc d;
  d.input("x", {4, 8}).input("y", {4, 8});
  d.op("add", "aten.add.Tensor", {ref_to("x"), ref_to("y")}, {4, 8});
  d.op("neg", "aten.neg.default", {ref_to("add")}, {4, 8});
  d.op("relu", "aten.relu.default", {ref_to("neg")}, {4, 8}).output("relu").output("add");
  ASSERT_EQ(matches(d, {three}).size(), 1u);
  d.output("neg");
  EXPECT_TRUE(matches(d, {three}).empty());
}

TEST(MatcherCore, DtypeAndArchSelectRules) {
  EXPECT_TRUE(matches(add_relu(false, "float16"), {kAddRelu}).empty());
  Json other_arch = kAddRelu;
  other_arch["archs"] = {"sm80"};
  EXPECT_TRUE(matches(add_relu(false), {other_arch}).empty());
}

TEST(MatcherCore, ConstantsOptionalNodesAndAttrs) {
  // y = dropout(x * 0.5, p=0) -- the dropout is optional, the constant must be 0.5 within tol.
  Json r = rule("half", {{{"id", "m"}, {"op", "aten.mul.Tensor"}, {"args", {"$x", {{"const", 0.5}, {"tol", 1e-6}}}}},
                         {{"id", "d"}, {"op", "aten.dropout.default"}, {"args", {"m", {{"const", 0.0}}, {{"any", true}}}},
                          {"optional", true}, {"passthrough", "m"}, {"attrs", {{"dropped", true}}},
                          {"attrs_if_absent", {{"dropped", false}}}},
                         {{"id", "out"}, {"op", "aten.neg.default"}, {"args", {"d"}}}},
                "out");
  auto build = [](double c, bool with_dropout) {
    GraphDoc d;
    d.input("x", {4}).op("m", "aten.mul.Tensor", {ref_to("x"), c}, {4});
    std::string last = "m";
    if (with_dropout) {
      d.op("d", "aten.dropout.default", {ref_to("m"), 0.0, false}, {4});
      last = "d";
    }
    d.op("n", "aten.neg.default", {ref_to(last)}, {4}).output("n");
    return d;
  };
  auto with = matches(build(0.5, true), {r});
  ASSERT_EQ(with.size(), 1u);
  EXPECT_EQ(with[0].nodes, (std::vector<std::string>{"m", "d", "n"}));
  EXPECT_EQ(with[0].attrs.at("dropped"), true);
  auto without = matches(build(0.5000001, false), {r});
  ASSERT_EQ(without.size(), 1u);
  EXPECT_EQ(without[0].nodes, (std::vector<std::string>{"m", "n"}));
  EXPECT_EQ(without[0].attrs.at("dropped"), false);
  EXPECT_TRUE(matches(build(0.6, true), {r}).empty());
}

TEST(MatcherCore, LooksThroughViewsAndBindsLiterals) {
  GraphDoc d;
  d.input("x", {2, 8});
  d.op("v", "aten.view.default", {ref_to("x"), {16}}, {16});
  d.op("c", "aten.contiguous.default", {ref_to("v")}, {16});
  d.op("s", "aten.softmax.int", {ref_to("c"), -1}, {16});
  d.output("s");
  Json r = rule("sm", {{{"id", "s"}, {"op", "aten.softmax.int"},
                        {"args", {{{"var", "$x"}, {"through", {"aten.view.default", "aten.contiguous.default"}}},
                                  {{"attr", "dim"}, {"type", "int"}}}}}},
                "s", {{"constraints", {"dim == -1"}}, {"dims", {{"n", "numel($x)"}}}});
  auto ms = matches(d, {r});
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].inputs.at("$x"), "x");
  EXPECT_EQ(ms[0].nodes, (std::vector<std::string>{"v", "c", "s"}));
  EXPECT_EQ(ms[0].attrs.at("dim"), -1);
  // A stepped-over view with another user stays outside: the variable binds nearer.
  d.output("v");
  ms = matches(d, {r});
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].inputs.at("$x"), "v");
  EXPECT_EQ(ms[0].nodes, (std::vector<std::string>{"c", "s"}));
}

TEST(MatcherCore, ListArgumentsMatchElementByElement) {
  // cat([neg(x), relu(x)], -1): a list of graph values; a literal list still compares as a literal.
  GraphDoc d;
  d.input("x", {2, 8});
  d.op("n", "aten.neg.default", {ref_to("x")}, {2, 8});
  d.op("r", "aten.relu.default", {ref_to("x")}, {2, 8});
  d.op("c", "aten.cat.default", Json::array({Json::array({ref_to("n"), ref_to("r")}), -1}), {2, 16});
  d.output("c");
  auto cat_rule = [](Json parts) {
    return rule("cat", {{{"id", "c"}, {"op", "aten.cat.default"}, {"args", {parts, {{"attr", "dim"}}}}},
                        {{"id", "n"}, {"op", "aten.neg.default"}, {"args", {"$x"}}},
                        {{"id", "r"}, {"op", "aten.relu.default"}, {"args", {"$x"}}}},
                "c");
  };
  auto ms = matches(d, {cat_rule({"n", "r"})});
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].nodes, (std::vector<std::string>{"n", "r", "c"}));
  EXPECT_EQ(ms[0].inputs.at("$x"), "x");
  EXPECT_EQ(ms[0].attrs.at("dim"), -1);
  EXPECT_TRUE(matches(d, {cat_rule({"r", "n"})}).empty());       // order matters
  EXPECT_TRUE(matches(d, {cat_rule({"n", "r", "n"})}).empty());  // so does the length
  Json literal = rule("lit", {{{"id", "c"}, {"op", "aten.cat.default"}, {"args", {{"$a", "$b"}, {{"in", {-1, 1}}}}}}},
                      "c");
  ASSERT_EQ(matches(d, {literal}).size(), 1u);
  EXPECT_EQ(matches(d, {literal})[0].inputs.at("$b"), "r");
  // A list naming no pattern node is a rule error, as a plain argument would be.
  Json bad = cat_rule({"n", "nope"});
  EXPECT_THROW(fact::discover::parse_rule(bad, "rules/x.json"), fact::Error);
}

TEST(MatcherCore, ResolveOverlapsKeepsTheBestDisjointSet) {
  auto mk = [](std::string rule, std::vector<std::string> nodes, int priority) {
    Match m;
    m.rule = rule;
    m.anchor = nodes.back();
    m.nodes = nodes;
    m.priority = priority;
    return m;
  };
  std::vector<Match> in = {mk("gemm", {"mm"}, 0), mk("big_k", {"mm"}, 10), mk("fused", {"mm", "relu"}, 0),
                           mk("norm", {"ln"}, 0), mk("other_norm", {"ln"}, 0)};
  auto by_size = fact::discover::resolve_overlaps(in, [](const Match& m) { return double(m.nodes.size()); });
  ASSERT_EQ(by_size.size(), 2u);
  EXPECT_EQ(by_size[0].rule, "fused");
  EXPECT_EQ(by_size[1].rule, "norm");  // tie on gain and priority: the earlier one
  auto flat = fact::discover::resolve_overlaps(in, [](const Match&) { return 1.0; });
  ASSERT_EQ(flat.size(), 2u);
  EXPECT_EQ(flat[0].rule, "big_k");  // equal gain: priority wins
}

TEST(MatcherCore, RuleFileErrorsNameTheField) {
  auto expect_bad = [](Json r, const std::string& needle) {
    try {
      fact::discover::parse_rule(r, "rules/x.json");
      FAIL() << needle;
    } catch (const fact::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Json good = kAddRelu;
  Json bad = good;
  bad.erase("family");
  expect_bad(bad, "'family'");
  bad = good;
  bad["pattern"]["output"] = "nope";
  expect_bad(bad, "'nope'");
  bad = good;
  bad["pattern"]["nodes"][1]["args"] = {"summ"};
  expect_bad(bad, "'summ'");
  bad = good;
  bad["dims"] = {{"M", "1 +"}};
  expect_bad(bad, "dims['M']");
  bad = good;
  bad["examples"] = {"49_hopper"};
  expect_bad(bad, "cutlass:");
  bad = good;
  bad["pattern"]["nodes"][1]["optional"] = true;
  expect_bad(bad, "passthrough");
  bad = good;
  bad["dtypes"] = {"float33"};
  expect_bad(bad, "float33");
  bad = good;
  bad["pattern"]["extra_outputs"] = {"act"};
  expect_bad(bad, "names the anchor 'act'");
  bad = good;
  bad["pattern"]["extra_outputs"] = {"nope"};
  expect_bad(bad, "extra_outputs entry \"nope\"");
  bad = good;
  bad["pattern"]["extra_outputs"] = "sum";
  expect_bad(bad, "must be an array");
  bad = good;
  bad["pattern"]["extra_output"] = {"sum"};
  expect_bad(bad, "unknown field 'extra_output'");
  auto reg = registry_of({good});
  EXPECT_THROW(reg.add(fact::discover::parse_rule(good, "again")), fact::Error);
}
