// The composer's channels-last chains (compose/channels_last.h): a FACT convolution writes channels-last where its
// value reaches, directly or through PyTorch's order-keeping ops (a cuDNN conv, pooling, elementwise), FACT
// convolutions reading more bytes in place than must be made contiguous again; a value the graph returns, or another
// op reads, is in PyTorch's order. The ops' own layout handling is checked on the GPU (tests/python/test_conv_case.py).
#include <gtest/gtest.h>

#include <string>

#include "compose/channels_last.h"
#include "compose/module_writer.h"
#include "core/arch_spec.h"
#include "discover/pattern_registry.h"
#include "discover/plan.h"
#include "ir_test_graphs.h"
#include "realize/families/conv/family.h"

using namespace fact;
using fact::test::GraphDoc;
using fact::test::ref_to;

namespace {

discover::Plan plan_of(GraphDoc& d) {
  static const auto registry = discover::PatternRegistry::builtin();
  return discover::make_plan(d.graph(), registry, ir::OpTable::builtin(), ArchSpec::builtin("sm90"),
                             Numerics::x3tf32);
}

// x [4, 16, 18, 18] -> conv(w1) + relu -> conv(w2) + relu [4, 32, 14, 14], returned; with `pytorch_reads_first`
// the first block's value is also summed by PyTorch.
GraphDoc two_convs(bool pytorch_reads_first) {
  GraphDoc d;
  d.input("w1", {32, 16, 3, 3}, "float32", "parameter").input("w2", {32, 32, 3, 3}, "float32", "parameter");
  d.input("x", {4, 16, 18, 18});
  d.op("conv1", "aten.conv2d.default", {ref_to("x"), ref_to("w1")}, {4, 32, 16, 16});
  d.op("relu1", "aten.relu.default", {ref_to("conv1")}, {4, 32, 16, 16});
  d.op("conv2", "aten.conv2d.default", {ref_to("relu1"), ref_to("w2")}, {4, 32, 14, 14});
  d.op("relu2", "aten.relu.default", {ref_to("conv2")}, {4, 32, 14, 14});
  d.output("relu2");
  if (pytorch_reads_first) {
    d.op("total", "aten.sum.default", {ref_to("relu1")}, {});
    d.output("total");
  }
  return d;
}

// Every conv entry accepted, with its problem and first-ranked config as the tune report's row.
std::vector<compose::PatternVerdict> accept_convs(const discover::Plan& plan) {
  std::vector<compose::PatternVerdict> out;
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    const auto& m = plan.entries[i].match;
    compose::PatternVerdict v;
    v.entry = i;
    if (m.family == "conv") {
      realize::ConvProblem p = realize::conv_problem_from_match(m, plan.graph, Numerics::tf32, Arch::sm90);
      realize::ConvConfig c = realize::enumerate_conv_configs(p, 1).ranked.at(0);
      v.accepted = true;
      v.family = "conv";
      v.op_name = c.id();
      v.row = {{"problem", p.to_json()}, {"config", c.to_json()}};
    }
    out.push_back(v);
  }
  return out;
}

void reject(const discover::Plan& plan, std::vector<compose::PatternVerdict>& verdicts, const std::string& anchor) {
  for (auto& v : verdicts)
    if (plan.entries[v.entry].match.anchor == anchor) v.accepted = false;
}

}  // namespace

TEST(ComposeChannelsLast, AConvReadOnlyByAFactConvWritesChannelsLast) {
  GraphDoc d = two_convs(false);
  discover::Plan plan = plan_of(d);
  auto verdicts = accept_convs(plan);
  ASSERT_EQ(std::count_if(verdicts.begin(), verdicts.end(), [](const auto& v) { return v.accepted; }), 2);
  EXPECT_EQ(compose::channels_last_plan(plan, verdicts).writes, (std::set<std::string>{"relu1"}))
      << "the second conv's value is the graph's result: PyTorch's order";
  std::string source = compose::model_new_source(plan, verdicts);
  EXPECT_NE(source.find("channels_last=True"), std::string::npos);
  EXPECT_EQ(source.find("channels_last=True"), source.rfind("channels_last=True")) << "one op asks for it";

  // With the second conv left to PyTorch, the first writes PyTorch's order: nothing would read it in place, and the
  // result would be made contiguous again.
  reject(plan, verdicts, "relu2");
  auto layout = compose::channels_last_plan(plan, verdicts);
  EXPECT_TRUE(layout.writes.empty());
  EXPECT_TRUE(layout.contiguous.empty());
}

TEST(ComposeChannelsLast, AValuePyTorchAlsoReadsStaysChannelsFirst) {
  GraphDoc d = two_convs(true);
  discover::Plan plan = plan_of(d);
  auto verdicts = accept_convs(plan);
  EXPECT_TRUE(compose::channels_last_plan(plan, verdicts).writes.empty()) << "aten.sum reads it in PyTorch's order";
}

// FACT conv -> cuDNN conv + ReLU (PyTorch's) -> FACT conv: the order flows through PyTorch's conv to the second FACT
// conv, which reads it in place.
TEST(ComposeChannelsLast, TheOrderFlowsThroughPyTorchsConvolutionsToTheNextFactConv) {
  GraphDoc d;
  d.input("w1", {32, 16, 3, 3}, "float32", "parameter").input("w2", {32, 32, 3, 3}, "float32", "parameter");
  d.input("w3", {32, 32, 3, 3}, "float32", "parameter").input("x", {4, 16, 20, 20});
  d.op("conv1", "aten.conv2d.default", {ref_to("x"), ref_to("w1")}, {4, 32, 18, 18});
  d.op("relu1", "aten.relu.default", {ref_to("conv1")}, {4, 32, 18, 18});
  d.op("conv2", "aten.conv2d.default", {ref_to("relu1"), ref_to("w2")}, {4, 32, 16, 16});
  d.op("relu2", "aten.relu.default", {ref_to("conv2")}, {4, 32, 16, 16});
  d.op("conv3", "aten.conv2d.default", {ref_to("relu2"), ref_to("w3")}, {4, 32, 14, 14});
  d.op("relu3", "aten.relu.default", {ref_to("conv3")}, {4, 32, 14, 14});
  d.output("relu3");
  discover::Plan plan = plan_of(d);
  auto verdicts = accept_convs(plan);
  reject(plan, verdicts, "relu2");
  auto layout = compose::channels_last_plan(plan, verdicts);
  EXPECT_EQ(layout.writes, (std::set<std::string>{"relu1"}));
  EXPECT_TRUE(layout.contiguous.empty());
}

// FACT conv -> (FACT conv, returned) and (max_pool2d -> view, returned): the FACT reader gains the conv's whole value,
// the pooled quarter is made contiguous for its view.
TEST(ComposeChannelsLast, APyTorchValueAViewReadsIsMadeContiguousWhereItIsDefined) {
  GraphDoc d = two_convs(false);
  d.op("pool", "aten.max_pool2d.default", {ref_to("relu1"), fact::ir::Json::array({2, 2})}, {4, 32, 8, 8});
  d.op("flat", "aten.view.default", {ref_to("pool"), fact::ir::Json::array({4, -1})}, {4, 2048});
  d.output("flat");
  discover::Plan plan = plan_of(d);
  auto verdicts = accept_convs(plan);
  auto layout = compose::channels_last_plan(plan, verdicts);
  EXPECT_EQ(layout.writes, (std::set<std::string>{"relu1"}));
  EXPECT_EQ(layout.contiguous, (std::set<std::string>{"pool"}));
  std::string source = compose::model_new_source(plan, verdicts);
  EXPECT_NE(source.find(".contiguous()  # channels-last from FACT's convolutions"), std::string::npos) << source;
}
