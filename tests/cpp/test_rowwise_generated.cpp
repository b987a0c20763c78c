// Discover's generated row-wise pass (rowwise_regions.h), the row program lowering and the kernel generator.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/arch_spec.h"
#include "core/error.h"
#include "discover/plan.h"
#include "discover/pointwise_expr.h"
#include "discover/row_program.h"
#include "discover/rowwise_fragment.h"
#include "family_nvcc_check.h"
#include "torch_headers_check.h"
#include "ir_test_graphs.h"
#include "realize/families/rowwise/rowwise_codegen.h"
#include "realize/kernel_abi_header.h"
#include "realize/kernel_family.h"
#include "realize/families/gemm/gemm_codegen.h"

namespace {
using namespace fact;
namespace fs = std::filesystem;
using fact::test::GraphDoc;
using fact::test::ref_to;
using fact::test::Json;

discover::Plan plan_of(const GraphDoc& d) {
  return discover::make_plan(d.graph(), discover::PatternRegistry::builtin(), ir::OpTable::builtin(),
                             ArchSpec::builtin("sm90"), Numerics::x3tf32);
}

const discover::PlanEntry* generated(const discover::Plan& p) {
  for (const auto& e : p.entries)
    if (e.match.rule == discover::kGeneratedRowwiseRule) return &e;
  return nullptr;
}

bool noted(const discover::Plan& p, const std::string& text) {
  for (const auto& n : p.notes)
    if (n.find(text) != std::string::npos) return true;
  return false;
}

// The family's ranked kernel configs for a program (defined below).
std::vector<realize::RowwiseKernelConfig> configs_of(const discover::RowProgram& p, Arch arch = Arch::sm90);
// The generated op wrapper of a graph's generated row-wise entry (defined below).
std::string generated_op_wrapper(const GraphDoc& d);

GraphDoc pointwise_chain() {
  GraphDoc d;
  d.input("x", {64, 100}).input("b", {100});
  d.op("m", "aten.mul.Tensor", {ref_to("x"), 0.5}, {64, 100});
  d.op("a", "aten.add.Tensor", {ref_to("m"), ref_to("b")}, {64, 100});
  d.op("g", "aten.gelu.default", {ref_to("a")}, {64, 100}).output("g");
  return d;
}

GraphDoc softmax_after_pointwise(int64_t cols) {
  GraphDoc d;
  d.input("x", {33, cols});
  d.op("t", "aten.tanh.default", {ref_to("x")}, {33, cols});
  d.op("s", "aten.softmax.int", {ref_to("t"), -1}, {33, cols}).output("s");
  return d;
}

TEST(RowwiseGenerated, PointwiseChainIsOneEntryWithABroadcastInput) {
  auto p = plan_of(pointwise_chain());
  const auto* e = generated(p);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"m", "a", "g"}));
  EXPECT_EQ(e->match.inputs.at("$in0"), "x");
  EXPECT_EQ(e->match.inputs.at("$in1"), "b");
  EXPECT_EQ(e->match.kernel["kind"], "ir");
  EXPECT_GT(e->cost.gain_seconds(), 0);  // two intermediates no longer written and read
  auto prog = discover::lower_row_program(e->match.kernel["fragment"]);
  EXPECT_EQ(prog.reductions(), 0);
  EXPECT_EQ(prog.inputs[1], discover::RowInputKind::row_broadcast);
}

TEST(RowwiseGenerated, ReductionsGivePerRowOutputsAndNonAdjacentDimsAreRefused) {
  GraphDoc d;
  d.input("x", {8, 16, 32});
  d.op("e", "aten.exp.default", {ref_to("x")}, {8, 16, 32});
  d.op("s", "aten.sum.dim_IntList", {ref_to("e"), Json::array({-1}), false}, {8, 16});
  d.op("l", "aten.log.default", {ref_to("s")}, {8, 16}).output("l");
  auto p = plan_of(d);
  ASSERT_NE(generated(p), nullptr);
  auto prog = discover::lower_row_program(generated(p)->match.kernel["fragment"]);
  EXPECT_TRUE(prog.output_per_row);
  EXPECT_EQ(prog.rows, 128);
  EXPECT_EQ(prog.cols, 32);
  {  // [8, 16, 32] less its row dim is the anchor's [8, 16]: the call takes the op's result as it is
    const auto& e = *generated(p);
    const auto* family = realize::kernel_family_for(e.match);
    Json problem = family->problem_from_match(e.match, p.graph, Numerics::fp32, Arch::sm90);
    Json config = family->candidates(problem, 1).ranked.at(0).config;
    realize::OpCallSite site{e.match, p.graph, problem, config, "torch.ops.fact.r", "l", "pattern rowwise",
                             [&](const char*, bool) -> std::string { return "x"; },
                             [&](const char*) -> const ir::Node* { return nullptr; }};
    EXPECT_EQ(family->op_call(site).expression, "torch.ops.fact.r(x)");
  }

  // A reduction over dims of extent 1 leaves as many elements in fewer dims: its dims index its input's
  // (KernelBench level2/42's sum over [2, 3] of a [16, 1, 1, 1] value).
  GraphDoc ones;
  ones.input("x", {16, 1, 1, 1});
  ones.op("s", "aten.sum.dim_IntList", {ref_to("x"), Json::array({2, 3}), false}, {16, 1});
  ones.op("m", "aten.mul.Tensor", {ref_to("s"), 10.0}, {16, 1}).output("m");
  auto po = plan_of(ones);
  ASSERT_NE(generated(po), nullptr) << fmt::format("{}", fmt::join(po.notes, "\n"));
  auto one = discover::lower_row_program(generated(po)->match.kernel["fragment"]);
  EXPECT_EQ(one.rows, 16);
  EXPECT_EQ(one.cols, 1);
  EXPECT_TRUE(po.uncovered_ops.empty());
  // Its op returns the full [16, 1, 1, 1] (no per-row value: one element a row); the module's call views it as the
  // anchor's [16, 1] (the composed level2/42 had returned [16, 1, 1, 1] and failed its end-to-end check).
  const auto& oe = *generated(po);
  const auto* family = realize::kernel_family_for(oe.match);
  Json problem = family->problem_from_match(oe.match, po.graph, Numerics::fp32, Arch::sm90);
  Json config = family->candidates(problem, 1).ranked.at(0).config;
  EXPECT_FALSE(config.value("output_per_row", true));
  realize::OpCallSite site{oe.match, po.graph, problem, config, "torch.ops.fact.r", "m", "pattern rowwise",
                           [&](const char*, bool) -> std::string { return "x"; },
                           [&](const char*) -> const ir::Node* { return nullptr; }};
  EXPECT_EQ(family->op_call(site).expression, "torch.ops.fact.r(x).view(16, 1)");

  GraphDoc bad;
  bad.input("x", {8, 16, 32});
  bad.op("s", "aten.sum.dim_IntList", {ref_to("x"), Json::array({0, 2}), true}, {1, 16, 1}).output("s");
  auto pb = plan_of(bad);
  EXPECT_EQ(generated(pb), nullptr);
  EXPECT_TRUE(noted(pb, "not adjacent")) << fmt::format("{}", fmt::join(pb.notes, "\n"));
}

// RMSNorm over the channels of [N, C, H, W] (KernelBench level1/36's graph): the mean reduces dim 1, so a row is
// C elements H*W apart.
GraphDoc rms_over_channels(int64_t n, int64_t c, int64_t hw, bool output = true) {
  GraphDoc d;
  d.input("x", {n, c, hw, 1});
  d.op("p", "aten.pow.Tensor_Scalar", {ref_to("x"), 2}, {n, c, hw, 1});
  d.op("m", "aten.mean.dim", {ref_to("p"), Json::array({1}), true}, {n, 1, hw, 1});
  d.op("a", "aten.add.Tensor", {ref_to("m"), 1e-5}, {n, 1, hw, 1});
  d.op("s", "aten.sqrt.default", {ref_to("a")}, {n, 1, hw, 1});
  d.op("y", "aten.div.Tensor", {ref_to("x"), ref_to("s")}, {n, c, hw, 1});
  if (output) d.output("y");
  return d;
}

TEST(RowwiseGenerated, ReductionsOverLeadingDimsMakeStridedRows) {
  auto p = plan_of(rms_over_channels(4, 64, 1000));
  const auto* e = generated(p);
  ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"p", "m", "a", "s", "y"}));
  const Json& f = e->match.kernel["fragment"];
  EXPECT_EQ(f["inner_dims"], 2);
  EXPECT_EQ(f["inner"], 1000);
  auto prog = discover::lower_row_program(f);
  EXPECT_EQ(prog.rows, 4000);
  EXPECT_EQ(prog.cols, 64);
  EXPECT_EQ(prog.inner, 1000);
  EXPECT_FALSE(prog.output_per_row);
  // 64 elements a row: one pass with two threads per row (32 each), a warp on 32 adjacent rows.
  auto cs = realize::rowwise_kernel_configs(prog, realize::family_data("rowwise").at("space"), ArchSpec::of(Arch::sm90));
  ASSERT_FALSE(cs.empty());
  for (const auto& c : cs) {
    EXPECT_EQ(c.vec, 1) << c.text();
    EXPECT_GE(c.threads / c.split, 32) << c.text();
    EXPECT_EQ(c.cluster, 1) << c.text();
  }
  EXPECT_TRUE(cs[0].one_pass) << cs[0].text();
  std::string text = realize::render_rowwise_kernel(prog, cs[0], "t", "");
  EXPECT_NE(text.find("constexpr int64_t kInner = 1000;"), std::string::npos);
  EXPECT_NE(text.find("a->rows % 1000 != 0"), std::string::npos);  // whole blocks of strided rows only
  EXPECT_NE(text.find("col0 * kInner"), std::string::npos);
  auto back = realize::RowwiseKernelConfig::from_json(cs[0].to_json());
  EXPECT_EQ(back.split, cs[0].split);
  // The op keeps the rows' stride: per-row outputs drop (or keep as 1) the reduced dims in the middle.
  auto problem = realize::kernel_family_for(e->match)->problem_from_match(e->match, p.graph, Numerics::fp32, Arch::sm90);
  EXPECT_EQ(problem["fragment"]["inner"], 1000);
  EXPECT_EQ(problem["fragment"]["inner_dims"], 2);

  // A per-channel [C, 1, 1] weight is the strided rows' shared row; a [H*W, 1] one is no row: it stays PyTorch's.
  GraphDoc w = rms_over_channels(4, 64, 1000, false);
  w.input("g", {64, 1000, 1});
  w.op("z", "aten.mul.Tensor", {ref_to("y"), ref_to("g")}, {4, 64, 1000, 1}).output("z");
  auto pw = plan_of(w);
  for (const auto& e : pw.entries) {
    const auto& n = e.match.nodes;
    EXPECT_FALSE(std::count(n.begin(), n.end(), "m") && std::count(n.begin(), n.end(), "z")) << e.match.anchor;
  }
  EXPECT_THROW(discover::make_rowwise_fragment(pw.graph, {"p", "m", "a", "s", "y", "z"}, {}), Error);
  GraphDoc c = rms_over_channels(4, 64, 1000, false);
  c.input("g", {64, 1, 1});
  c.op("z", "aten.mul.Tensor", {ref_to("y"), ref_to("g")}, {4, 64, 1000, 1}).output("z");
  auto plan_c = plan_of(c);
  const auto* ec = generated(plan_c);
  ASSERT_NE(ec, nullptr);
  ASSERT_EQ(ec->match.nodes.size(), 6u) << fmt::format("{}", fmt::join(plan_c.notes, "\n"));
  auto pc = discover::lower_row_program(ec->match.kernel["fragment"]);
  EXPECT_EQ(pc.inputs.at(1), discover::RowInputKind::row_broadcast);
  std::string ct = realize::render_rowwise_kernel(pc, realize::rowwise_kernel_configs(pc, realize::family_data("rowwise").at("space"),
                                                                                      ArchSpec::of(Arch::sm90)).at(0), "t", "");
  EXPECT_NE(ct.find("const Element* in1 = static_cast<const Element*>(a.inputs[1]);"), std::string::npos)
      << "the shared row is read at its own index, not the strided row's";
  // The agent's registered kernels take contiguous rows only: strided regions are not its candidates.
  EXPECT_TRUE(discover::rowwise_candidates(plan_of(rms_over_channels(4, 64, 1000))).empty());
}

// A per-channel bias, scale and activation after a convolution (KernelBench level2/2's tail after cuDNN's
// transposed conv): pointwise only, rows of channels so that the bias is one shared row.
GraphDoc bias_over_channels() {
  GraphDoc d;
  d.input("x", {2, 16, 6, 7}).input("b", {16, 1, 1});
  d.op("a", "aten.add.Tensor", {ref_to("x"), ref_to("b")}, {2, 16, 6, 7});
  d.op("m", "aten.mul.Tensor", {ref_to("a"), 2.0}, {2, 16, 6, 7});
  d.op("s", "aten.sigmoid.default", {ref_to("m")}, {2, 16, 6, 7}).output("s");
  return d;
}

TEST(RowwiseGenerated, APerChannelVectorMakesRowsOfChannels) {
  auto p = plan_of(bias_over_channels());
  const auto* e = generated(p);
  ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
  auto prog = discover::lower_row_program(e->match.kernel["fragment"]);
  EXPECT_EQ(prog.reductions(), 0);
  EXPECT_EQ(prog.cols, 16);
  EXPECT_EQ(prog.inner, 42);
  EXPECT_EQ(prog.rows, 84);
  EXPECT_EQ(prog.inputs.at(1), discover::RowInputKind::row_broadcast);
  auto c = realize::rowwise_kernel_configs(prog, realize::family_data("rowwise").at("space"), ArchSpec::of(Arch::sm90)).at(0);
  std::string text = realize::render_rowwise_kernel(prog, c, "t", "");
  EXPECT_NE(text.find("in1[((i + e) / kInner) % kCols]"), std::string::npos);
  EXPECT_NE(text.find("a->rows % 42 != 0"), std::string::npos);
}

TEST(RowwiseGenerated, InstanceNormNormalizesEachChannelsPlaneWithOrWithoutWeights) {
  GraphDoc d;  // nn.InstanceNorm2d(8) (affine=False): rows of H*W per sample and channel
  d.input("x", {2, 8, 6, 10});
  d.op("n", "aten.instance_norm.default", {ref_to("x"), nullptr, nullptr, nullptr, nullptr, true, 0.1, 1e-5, false},
       {2, 8, 6, 10}).output("n");
  auto p = plan_of(d);
  ASSERT_NE(generated(p), nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
  auto prog = discover::lower_row_program(generated(p)->match.kernel["fragment"]);
  EXPECT_EQ(prog.rows, 16);
  EXPECT_EQ(prog.cols, 60);
  EXPECT_EQ(prog.reductions(), 1);  // mean and variance in one Welford sweep
  GraphDoc w;
  w.input("x", {2, 8, 6, 10}).input("g", {8});
  w.op("n", "aten.instance_norm.default", {ref_to("x"), ref_to("g"), nullptr, nullptr, nullptr, true, 0.1, 1e-5, false},
       {2, 8, 6, 10}).output("n");
  auto pw = plan_of(w);  // nn.InstanceNorm2d(8, affine=True): the weight is read by channel (row % 8)
  ASSERT_NE(generated(pw), nullptr) << fmt::format("{}", fmt::join(pw.notes, "\n"));
  const Json& f = generated(pw)->match.kernel["fragment"];
  EXPECT_EQ(f["inputs"][1]["channel"], (Json{{"channels", 8}, {"inner", 60}}));
  auto pr = discover::lower_row_program(f);
  EXPECT_EQ(pr.inputs[1], discover::RowInputKind::channel);
}

// nn.GroupNorm(groups, C) over x, then hardtanh (KernelBench level2/30's tail; 4-D: level1/35).
GraphDoc group_norm_hardtanh(std::vector<int64_t> shape, int64_t groups) {
  GraphDoc d;
  d.input("x", shape).input("w", {shape[1]}).input("b", {shape[1]});
  d.op("gn", "aten.group_norm.default", {ref_to("x"), groups, ref_to("w"), ref_to("b"), 1e-5, false}, shape);
  d.op("t", "aten.hardtanh.default", {ref_to("gn")}, shape).output("t");
  return d;
}

TEST(RowwiseGenerated, GroupNormRowsAreGroupsAndItsWeightsAreReadByChannel) {
  auto p = plan_of(group_norm_hardtanh({16, 64}, 8));
  const auto* e = generated(p);
  ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"gn", "t"}));
  const Json& f = e->match.kernel["fragment"];
  EXPECT_EQ(f["rows"], 128);  // 16 samples x 8 groups
  EXPECT_EQ(f["cols"], 8);
  EXPECT_EQ(f["groups"], 8);
  EXPECT_EQ(f["inputs"][1]["channel"], (Json{{"channels", 64}, {"inner", 1}}));
  EXPECT_EQ(f["inputs"][2]["broadcast"], true) << "read whole by every row";
  auto prog = discover::lower_row_program(f);
  EXPECT_EQ(prog.reductions(), 1);
  EXPECT_EQ(prog.statements[3].reduce, "meanvar");
  EXPECT_EQ(prog.inputs[1], discover::RowInputKind::channel);
  auto c = configs_of(prog).at(0);
  std::string text = realize::render_rowwise_kernel(prog, c, "t", "");
  EXPECT_NE(text.find("in1[((row * kCols + col0 + e) / 1) % 64]"), std::string::npos) << text;
  // Mean then variance from registers in one pass; Welford's single sweep when the row is read from memory.
  ASSERT_TRUE(c.one_pass);
  EXPECT_NE(text.find("a_v3_v += ("), std::string::npos) << text;
  EXPECT_EQ(text.find("OpMeanM2{}, smem_mv"), std::string::npos) << text;
  auto cs = configs_of(prog);
  auto two = std::find_if(cs.begin(), cs.end(), [](const auto& k) { return !k.one_pass; });
  ASSERT_NE(two, cs.end());
  EXPECT_NE(realize::render_rowwise_kernel(prog, *two, "t", "").find("row_reduce(a_v3, OpMeanM2{}, smem_mv)"),
            std::string::npos);

  auto p4 = plan_of(group_norm_hardtanh({2, 8, 6, 10}, 4));  // a row: 2 channels' 6 x 10 planes
  ASSERT_NE(generated(p4), nullptr) << fmt::format("{}", fmt::join(p4.notes, "\n"));
  const Json& f4 = generated(p4)->match.kernel["fragment"];
  EXPECT_EQ(f4["rows"], 8);
  EXPECT_EQ(f4["cols"], 120);
  EXPECT_EQ(f4["inputs"][1]["channel"], (Json{{"channels", 8}, {"inner", 60}}));

  // Groups that do not divide the channels: PyTorch's (which refuses them too).
  auto bad = plan_of(group_norm_hardtanh({16, 60}, 8));
  EXPECT_TRUE(noted(bad, "into 8 groups, which do not divide it")) << fmt::format("{}", fmt::join(bad.notes, "\n"));
}

// torch.min(x, torch.tensor(c)) after a norm (KernelBench level2/83): the 0-d tensor is an input of one channel,
// its one value read by every element.
TEST(RowwiseGenerated, AZeroDimTensorIsReadAsOneValueForAll) {
  GraphDoc d;
  d.input("x", {2, 8, 6, 10}).input("w", {8}).input("b", {8}).input("c", {});
  d.op("gn", "aten.group_norm.default", {ref_to("x"), 4, ref_to("w"), ref_to("b"), 1e-5, false}, {2, 8, 6, 10});
  d.op("m", "aten.min.other", {ref_to("gn"), ref_to("c")}, {2, 8, 6, 10}).output("m");
  auto p = plan_of(d);
  const auto* e = generated(p);
  ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"gn", "m"}));
  const Json& f = e->match.kernel["fragment"];
  ASSERT_EQ(f["inputs"].size(), 4u);
  EXPECT_EQ(f["inputs"][3]["channel"], (Json{{"channels", 1}, {"inner", 60}}));
  auto prog = discover::lower_row_program(f);
  EXPECT_EQ(prog.inputs[3], discover::RowInputKind::channel);
  std::string text = realize::render_rowwise_kernel(prog, configs_of(prog).at(0), "t", "");
  EXPECT_NE(text.find("% 1]"), std::string::npos) << text;
}

// A per-channel bias added after a mean over each channel's plane (KernelBench level2/42's tail): one value per row,
// read once at the row's first element (the per-element load lives inside the sweeps only).
GraphDoc mean_then_channel_bias() {
  GraphDoc d;
  d.input("x", {2, 8, 6, 10}).input("b", {8, 1, 1});
  d.op("m", "aten.mean.dim", {ref_to("x"), Json::array({2, 3}), true}, {2, 8, 1, 1});
  d.op("a", "aten.add.Tensor", {ref_to("m"), ref_to("b")}, {2, 8, 1, 1}).output("a");
  return d;
}
TEST(RowwiseGenerated, APerRowValueReadsAPerChannelInputOnceAtTheRowsStart) {
  auto p = plan_of(mean_then_channel_bias());
  const auto* e = generated(p);
  ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"m", "a"}));
  auto prog = discover::lower_row_program(e->match.kernel["fragment"]);
  ASSERT_EQ(prog.inputs.at(1), discover::RowInputKind::channel);
  ASSERT_TRUE(prog.output_per_row);
  for (const auto& c : configs_of(prog)) {
    std::string text = realize::render_rowwise_kernel(prog, c, "t", "");
    const size_t row_load = text.find("= to_float(in1[((row * kCols + 0) / 60) % 8]);");
    ASSERT_NE(row_load, std::string::npos) << c.to_json().dump() << "\n" << text;
    EXPECT_LT(row_load, text.find("out[0] = from_float<Element>(")) << text;
  }
}

TEST(RowwiseGenerated, VectorNormsOfOrdOneAndTwo) {
  // x / ||x||_2 over the rows (KernelBench level1/39's graph).
  GraphDoc d;
  d.input("x", {16, 300});
  d.op("n", "aten.linalg_vector_norm.default", {ref_to("x"), 2, Json::array({1}), true}, {16, 1});
  d.op("y", "aten.div.Tensor", {ref_to("x"), ref_to("n")}, {16, 300}).output("y");
  ASSERT_NE(generated(plan_of(d)), nullptr);
  auto prog = discover::lower_row_program(generated(plan_of(d))->match.kernel["fragment"]);
  EXPECT_EQ(prog.reductions(), 1);
  bool root = std::any_of(prog.statements.begin(), prog.statements.end(),
                          [](const auto& s) { return s.expr.find("sqrtf(") != std::string::npos; });
  EXPECT_TRUE(root);
  GraphDoc inf;
  inf.input("x", {16, 300});
  inf.op("n", "aten.linalg_vector_norm.default", {ref_to("x"), 3, Json::array({1}), true}, {16, 1});
  inf.op("y", "aten.div.Tensor", {ref_to("x"), ref_to("n")}, {16, 300}).output("y");
  auto pi = plan_of(inf);
  EXPECT_TRUE(noted(pi, "ord 3")) << fmt::format("{}", fmt::join(pi.notes, "\n"));
}

TEST(RowwiseGenerated, AWholeTensorReductionReadsTheKernelsPerRowPartials) {
  // mean((a - b) ** 2), MSE's graph: the kernel ends in each row's mean, PyTorch's mean.default reduces the 64.
  GraphDoc d;
  d.input("a", {64, 100}).input("b", {64, 100});
  d.op("sub", "aten.sub.Tensor", {ref_to("a"), ref_to("b")}, {64, 100});
  d.op("pow", "aten.pow.Tensor_Scalar", {ref_to("sub"), 2}, {64, 100});
  d.op("mean", "aten.mean.default", {ref_to("pow")}, {}).output("mean");
  auto p = plan_of(d);
  const auto* e = generated(p);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->match.anchor, "pow") << "the anchor's variable holds the partials the mean then reads";
  EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"sub", "pow"}));
  const Json& f = e->match.kernel["fragment"];
  EXPECT_EQ(f["output"], "pow__row_partials");
  EXPECT_EQ(f["nodes"].back()["op"], "aten.mean.dim");
  EXPECT_EQ(f["nodes"].back()["outputs"][0]["shape"], Json::array({64}));
  auto prog = discover::lower_row_program(f);
  EXPECT_TRUE(prog.output_per_row);
  EXPECT_EQ(prog.reductions(), 1);
  EXPECT_TRUE(noted(p, "mean (aten.mean.default) reduces all of pow: the generated kernel makes its 64 per-row partials"))
      << fmt::format("{}", fmt::join(p.notes, "\n"));
  auto problem = realize::kernel_family_for(e->match)->problem_from_match(e->match, p.graph, Numerics::fp32, Arch::sm90);
  EXPECT_EQ(problem["output_per_row"], true);
  EXPECT_EQ(problem["keepdim"], false) << "shaped as the partials, not as the anchor";

  // The full value also read elsewhere: the kernel must write it, and the mean stays as it was.
  GraphDoc shared = d;
  shared.op("relu", "aten.relu.default", {ref_to("pow")}, {64, 100}).output("relu");
  auto ps = plan_of(shared);
  for (const auto& e : ps.entries)
    if (e.match.rule == discover::kGeneratedRowwiseRule)
      EXPECT_EQ(e.match.kernel["fragment"].value("output", ""), e.match.anchor) << "no entry writes partials in place of pow";
}

// kl_div(log(p), t) as PyTorch decomposes it (xlogy: a zero test, a NaN test, two selects), then its sum.
GraphDoc kl_div_terms() {
  GraphDoc d;
  d.input("p", {64, 100}).input("t", {64, 100});
  d.op("logp", "aten.log.default", {ref_to("p")}, {64, 100});
  d.op("tlogp", "aten.mul.Tensor", {ref_to("t"), ref_to("logp")}, {64, 100});
  d.op("zero", "aten.eq.Scalar", {ref_to("t"), 0}, {64, 100}, "bool");
  d.op("logt", "aten.log.default", {ref_to("t")}, {64, 100});
  d.op("tlogt", "aten.mul.Tensor", {ref_to("t"), ref_to("logt")}, {64, 100});
  d.op("w", "aten.where.ScalarSelf", {ref_to("zero"), 0, ref_to("tlogt")}, {64, 100});
  d.op("nan", "aten.isnan.default", {ref_to("t")}, {64, 100}, "bool");
  d.op("w1", "aten.where.ScalarSelf", {ref_to("nan"), Json{{"float", "nan"}}, ref_to("w")}, {64, 100});
  d.op("sub", "aten.sub.Tensor", {ref_to("w1"), ref_to("tlogp")}, {64, 100});
  d.op("sum", "aten.sum.default", {ref_to("sub")}, {}).output("sum");
  return d;
}

TEST(RowwiseGenerated, ComparisonsAndSelectsAreOneKernelHoldingBoolsAsOneOrZero) {
  auto p = plan_of(kl_div_terms());
  const auto* e = generated(p);
  ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_EQ(e->match.nodes.size(), 9u) << "the bool values stay inside the kernel";
  EXPECT_EQ(e->match.kernel["fragment"]["output"], "sub__row_partials");
  auto prog = discover::lower_row_program(e->match.kernel["fragment"]);
  std::string exprs;
  for (const auto& st : prog.statements) exprs += st.expr + "\n";
  EXPECT_NE(exprs.find("== 0.000000000e+00f ? 1.0f : 0.0f"), std::string::npos) << exprs;
  EXPECT_NE(exprs.find("(isnan("), std::string::npos) << exprs;
  EXPECT_NE(exprs.find("!= 0.0f ? __int_as_float(0x7fffffff) :"), std::string::npos) << exprs;

  // A bool is never the kernel's result: a comparison read outside the region is PyTorch's.
  GraphDoc out;
  out.input("x", {8, 16});
  out.op("lt", "aten.lt.Scalar", {ref_to("x"), 1.0}, {8, 16}, "bool").output("lt");
  auto po = plan_of(out);
  EXPECT_EQ(generated(po), nullptr);
  EXPECT_TRUE(noted(po, "output 'lt' is bool")) << fmt::format("{}", fmt::join(po.notes, "\n"));

  // GEMM epilogue trees have no bools: pointwise_tree refuses a comparison or a select, so growth stops there.
  auto g = kl_div_terms().graph();
  auto leaf = [](const Json& ref) { return Json(ref["ref"]); };
  EXPECT_THROW(discover::pointwise_tree(g.at("zero"), leaf), discover::NotPointwise);
  EXPECT_THROW(discover::pointwise_tree(g.at("w"), leaf), discover::NotPointwise);
  EXPECT_THROW(discover::pointwise_tree(g.at("nan"), leaf), discover::NotPointwise);
}

TEST(RowwiseGenerated, ARegionSplitsAroundANodeThatCannotBeGenerated) {
  // exp -> sum over dims 0 and 2 (not adjacent) -> relu: the sum stays PyTorch's, exp and relu are generated apart.
  GraphDoc d;
  d.input("x", {8, 16, 32});
  d.op("e", "aten.exp.default", {ref_to("x")}, {8, 16, 32});
  d.op("s", "aten.sum.dim_IntList", {ref_to("e"), Json::array({0, 2}), true}, {1, 16, 1});
  d.op("r", "aten.relu.default", {ref_to("s")}, {1, 16, 1}).output("r");
  auto p = plan_of(d);
  std::vector<std::string> anchors;
  for (const auto& e : p.entries)
    if (e.match.rule == discover::kGeneratedRowwiseRule) anchors.push_back(e.match.anchor);
  std::sort(anchors.begin(), anchors.end());
  EXPECT_EQ(anchors, (std::vector<std::string>{"e", "r"}));
  EXPECT_TRUE(noted(p, "s left to PyTorch")) << fmt::format("{}", fmt::join(p.notes, "\n"));
}

TEST(RowwiseGenerated, SingleOpsSharedIntermediatesAndMixedDtypes) {
  GraphDoc one;
  one.input("x", {4, 8}).op("r", "aten.relu.default", {ref_to("x")}, {4, 8}).output("r");
  ASSERT_NE(generated(plan_of(one)), nullptr);

  // t is read by both s and the graph's output: two values leave the region, which stays PyTorch's.
  GraphDoc shared;
  shared.input("x", {4, 8});
  shared.op("t", "aten.tanh.default", {ref_to("x")}, {4, 8});
  shared.op("s", "aten.sigmoid.default", {ref_to("t")}, {4, 8});
  shared.op("o", "aten.add.Tensor", {ref_to("s"), ref_to("t")}, {4, 8});
  shared.op("u", "aten.neg.default", {ref_to("t")}, {4, 8}).output("o").output("u");
  auto ps = plan_of(shared);
  EXPECT_TRUE(noted(ps, "one output")) << fmt::format("{}", fmt::join(ps.notes, "\n"));
  // Cut into runs that each have one output: [t], [s, o], [u].
  std::vector<std::vector<std::string>> runs;
  for (const auto& e : ps.entries)
    if (e.match.rule == discover::kGeneratedRowwiseRule) runs.push_back(e.match.nodes);
  std::sort(runs.begin(), runs.end());
  EXPECT_EQ(runs, (std::vector<std::vector<std::string>>{{"s", "o"}, {"t"}, {"u"}}));

  GraphDoc mixed;
  mixed.input("x", {4, 8}).input("y", {4, 8}, "bfloat16");
  mixed.op("a", "aten.add.Tensor", {ref_to("x"), ref_to("y")}, {4, 8}).output("a");
  auto pm = plan_of(mixed);
  EXPECT_EQ(generated(pm), nullptr);
  EXPECT_TRUE(noted(pm, "mixed dtypes")) << fmt::format("{}", fmt::join(pm.notes, "\n"));
}

// A conv's output pooled, then pointwise ops (KernelBench level2/35's tail): max_pool2d 2x2 then mish.
GraphDoc max_pool_mish(std::vector<int64_t> in = {2, 8, 10, 10}) {
  std::vector<int64_t> out = in;
  out[2] /= 2;
  out[3] /= 2;
  GraphDoc d;
  d.input("x", in);
  d.op("p", "aten.max_pool2d.default", {ref_to("x"), Json::array({2, 2}), Json::array({2, 2})}, out);
  d.op("m", "aten.mish.default", {ref_to("p")}, out).output("m");
  return d;
}

// A padded 3-D average pool without the padding in its divisor, then softmax over the channels (strided rows).
GraphDoc avg_pool3d_softmax() {
  GraphDoc d;
  d.input("x", {2, 16, 5, 9, 9});
  d.op("p", "aten.avg_pool3d.default",
       {ref_to("x"), Json::array({3, 3, 3}), Json::array({2, 2, 2}), Json::array({1, 1, 1}), false, false}, {2, 16, 3, 5, 5});
  d.op("s", "aten.softmax.int", {ref_to("p"), 1}, {2, 16, 3, 5, 5}).output("s");
  return d;
}

TEST(RowwiseGenerated, APoolIsComputedWhereItsInputIsLoadedAndTheOpsAfterItJoinItsKernel) {
  auto p = plan_of(max_pool_mish());
  const auto* e = generated(p);
  ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"p", "m"}));
  EXPECT_EQ(e->match.inputs.at("$in0"), "x");
  const Json& fragment = e->match.kernel["fragment"];
  EXPECT_EQ(fragment["full_shape"], Json::array({2, 8, 5, 5}));  // the pool's output, not its input
  EXPECT_TRUE(fragment["inputs"][0].value("window", false));
  auto prog = discover::lower_row_program(fragment);
  ASSERT_EQ(prog.inputs.at(0), discover::RowInputKind::window);
  const auto& w = prog.window.at(0);
  EXPECT_EQ(w.form, "max");
  EXPECT_EQ(w.in, (std::vector<int64_t>{10, 10}));
  EXPECT_EQ(w.out, (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(w.kernel, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(w.stride, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(w.padding, (std::vector<int64_t>{0, 0}));
  EXPECT_FALSE(prog.computes_nothing());
  EXPECT_EQ(configs_of(prog).at(0).threads, 128);  // a flat pool: 128 threads measured best
  std::string text = realize::render_rowwise_kernel(prog, configs_of(prog).at(0), "t", "");
  EXPECT_NE(text.find("window0_run<V>(in0, i, l0);"), std::string::npos);  // V outputs' windows as runs of a row
  EXPECT_NE(text.find("window0_run<1>(in0, i, l0);"), std::string::npos);  // the scalar tail
  EXPECT_NE(text.find("kMode = 0;"), std::string::npos);                   // max
  EXPECT_NE(text.find("isnan(v)"), std::string::npos);  // max propagates NaN as PyTorch's

  auto pa = plan_of(avg_pool3d_softmax());
  ASSERT_NE(generated(pa), nullptr) << fmt::format("{}", fmt::join(pa.notes, "\n"));
  auto avg = discover::lower_row_program(generated(pa)->match.kernel["fragment"]);
  EXPECT_EQ(avg.inner, 75);  // softmax over channels: rows of 16 elements 3*5*5 apart
  EXPECT_EQ(avg.window.at(0).form, "avg");
  EXPECT_FALSE(avg.window.at(0).count_include_pad);
  EXPECT_EQ(avg.window.at(0).padding, (std::vector<int64_t>{1, 1, 1}));
  std::string at = realize::render_rowwise_kernel(avg, configs_of(avg).at(0), "t", "");
  EXPECT_NE(at.find("window0(in0, first + (col0 + e) * kInner)"), std::string::npos) << at.substr(0, 3000);
  EXPECT_NE(at.find("kMode = 2;"), std::string::npos);  // avg over the elements read (count_include_pad false)
}

// KernelBench level2/55's and 98's tails, small: a 1-D pool of the GEMM's output unsqueezed ([rows, 1, n]), squeezed
// back, then ops and a reduction over the squeezed tensor's dim 1. The squeeze keeps the elements: one kernel, the
// reduction's dim 1 of [rows, cols] being the pool's dim 2.
GraphDoc pool_squeeze_reduce(const char* pool, Json pool_args, const char* reduce) {
  GraphDoc d;
  d.input("u", {16, 1, 256});
  pool_args.insert(pool_args.begin(), ref_to("u"));
  d.op("p", pool, pool_args, {16, 1, 128});
  d.op("q", "aten.squeeze.dim", {ref_to("p"), 1}, {16, 128});
  d.op("g", "aten.gelu.default", {ref_to("q")}, {16, 128});
  d.op("r", reduce, {ref_to("g"), Json::array({1})}, {16});
  d.op("m", "aten.mul.Tensor", {ref_to("r"), 0.5}, {16}).output("m");
  return d;
}

TEST(RowwiseGenerated, ASqueezeBetweenAPoolAndARowReductionKeepsOneKernel) {
  for (auto [pool, args] : {std::pair{"aten.max_pool1d.default", Json::array({Json::array({2})})},
                            std::pair{"aten.avg_pool1d.default", Json::array({Json::array({2})})}}) {
    for (const char* reduce : {"aten.sum.dim_IntList", "aten.amax.default"}) {
      auto p = plan_of(pool_squeeze_reduce(pool, args, reduce));
      const auto* e = generated(p);
      ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
      EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"p", "q", "g", "r", "m"})) << pool << " " << reduce;
      const Json& fragment = e->match.kernel["fragment"];
      EXPECT_EQ(fragment["full_shape"], Json::array({16, 1, 128}));
      EXPECT_EQ(fragment["rows"], 16);
      EXPECT_EQ(fragment["cols"], 128);  // the pool's dim 2, not its dim 1 of extent 1
      auto prog = discover::lower_row_program(fragment);
      EXPECT_EQ(prog.reductions(), 1);
      EXPECT_TRUE(prog.output_per_row);
      // The op returns the pool's [16, 1, 128] less its row dim, [16, 1]; the module's call views it as the anchor's
      // [16] (the composed level2/55 and 98 returned [128, 1] and [1024, 1] and failed their end-to-end checks).
      const auto* family = realize::kernel_family_for(e->match);
      Json problem = family->problem_from_match(e->match, p.graph, Numerics::fp32, Arch::sm90);
      Json config = family->candidates(problem, 1).ranked.at(0).config;
      realize::OpCallSite site{e->match, p.graph, problem, config, "torch.ops.fact.r", "m", "pattern rowwise",
                               [&](const char*, bool) -> std::string { return "u"; },
                               [&](const char*) -> const ir::Node* { return nullptr; }};
      EXPECT_EQ(family->op_call(site).expression, "torch.ops.fact.r(u).view(16)");
    }
  }
  // The dims map through dims of extent 1 only: a reduction over them alone is none of the rows' dims.
  EXPECT_EQ(discover::reduced_dims_in({16, 128}, {1, 1}, {16, 1, 128}), (discover::ReducedDims{2, 1}));
  EXPECT_EQ(discover::reduced_dims_in({16, 1, 128}, {1, 1}, {16, 128}), std::nullopt);
  EXPECT_EQ(discover::reduced_dims_in({16, 128}, {1, 1}, {16, 2, 64}), std::nullopt);
  EXPECT_TRUE(discover::same_but_unit_dims({1, 16, 1, 128, 1}, {16, 128}));
  EXPECT_FALSE(discover::same_but_unit_dims({128, 16}, {16, 128}));
}

// A row's value without its reduced dims ([N]) read with full values [N, N]: PyTorch lines it up with the last dim (x
// divided by its column sums), so it is no value per row there; kept as one row ([rows, 1]) it is.
TEST(RowwiseGenerated, ARowsValueWithoutItsDimsReadWithFullValuesIsNotPerRow) {
  auto divide_by_sum = [](bool keepdim) {
    GraphDoc d;
    d.input("x", {64, 64});
    d.op("s", "aten.sum.dim_IntList", {ref_to("x"), Json::array({1}), keepdim},
         keepdim ? std::vector<int64_t>{64, 1} : std::vector<int64_t>{64});
    d.op("q", "aten.div.Tensor", {ref_to("x"), ref_to("s")}, {64, 64}).output("q");
    return d;
  };
  auto kept = plan_of(divide_by_sum(true));
  ASSERT_NE(generated(kept), nullptr);
  EXPECT_EQ(generated(kept)->match.nodes, (std::vector<std::string>{"s", "q"}));
  auto dropped = plan_of(divide_by_sum(false));
  EXPECT_TRUE(noted(dropped, "which broadcasts it along other dims than the rows'")) << fmt::format("{}", fmt::join(dropped.notes, "\n"));
  for (const auto& e : dropped.entries) EXPECT_NE(e.match.nodes, (std::vector<std::string>{"s", "q"}));
  // As a 2-D tensor against 3-D values: 1 along the rows' dims, their extent along the others.
  EXPECT_TRUE(discover::broadcasts_per_row({16, 1}, {16, 128}, {16, 1, 128}, {2, 1}));
  EXPECT_TRUE(discover::broadcasts_per_row({4, 1, 8}, {4, 6, 8}, {4, 6, 8}, {1, 1}));
  EXPECT_FALSE(discover::broadcasts_per_row({4, 8}, {4, 6, 8}, {4, 6, 8}, {1, 1}));
  EXPECT_FALSE(discover::broadcasts_per_row({16}, {16, 16}, {16, 16}, {1, 1}));
}

TEST(RowwiseGenerated, APoolOfAValueMadeInItsRegionIsCutOffAndAPooledInputIsReadOnlyByThePool) {
  // tanh -> max pool: the pool reads a value the region makes, so tanh is one kernel and the pool another.
  GraphDoc d;
  d.input("x", {2, 8, 10, 10});
  d.op("t", "aten.tanh.default", {ref_to("x")}, {2, 8, 10, 10});
  d.op("p", "aten.max_pool2d.default", {ref_to("t"), Json::array({2, 2})}, {2, 8, 5, 5}).output("p");
  auto p = plan_of(d);
  std::vector<std::vector<std::string>> runs;
  for (const auto& e : p.entries)
    if (e.match.rule == discover::kGeneratedRowwiseRule) runs.push_back(e.match.nodes);
  std::sort(runs.begin(), runs.end());
  EXPECT_EQ(runs, (std::vector<std::vector<std::string>>{{"p"}, {"t"}})) << fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_TRUE(noted(p, "a value made inside the fragment")) << fmt::format("{}", fmt::join(p.notes, "\n"));
  // Stride defaults to the window: [2, 2] from an empty list.
  auto pool = std::find_if(p.entries.begin(), p.entries.end(), [](const auto& e) { return e.match.anchor == "p"; });
  ASSERT_NE(pool, p.entries.end());
  EXPECT_EQ(discover::lower_row_program(pool->match.kernel["fragment"]).window.at(0).stride, (std::vector<int64_t>{2, 2}));

  // A hand-written fragment whose pointwise op reads the pooled input directly is refused, naming it.
  Json f = generated(plan_of(max_pool_mish()))->match.kernel["fragment"];
  f["nodes"][1]["args"][0] = {{"ref", "x"}};
  try {
    discover::lower_row_program(f);
    ADD_FAILURE() << "a pooled input read directly was lowered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only a pool reads"), std::string::npos) << e.what();
  }
}

std::vector<realize::RowwiseKernelConfig> configs_of(const discover::RowProgram& p, Arch arch) {
  return realize::rowwise_kernel_configs(p, realize::family_data("rowwise").at("space"), ArchSpec::of(arch));
}

discover::RowProgram program_of(const GraphDoc& d) {
  return discover::lower_row_program(generated(plan_of(d))->match.kernel["fragment"]);
}

GraphDoc softmax_rows(int64_t rows, int64_t cols) {
  GraphDoc d;
  d.input("x", {rows, cols});
  d.op("s", "aten.softmax.int", {ref_to("x"), -1}, {rows, cols}).output("s");
  return d;
}

TEST(RowwiseGenerated, ConfigSpaceRanksOnePassFirstWhenTheRowFits) {
  auto cs = configs_of(program_of(softmax_after_pointwise(1000)));
  ASSERT_FALSE(cs.empty());
  EXPECT_TRUE(cs[0].one_pass);
  EXPECT_EQ(cs[0].vec, 4);
  EXPECT_EQ(cs[0].cluster, 1);
  // A 100000-element row fits in registers only across a cluster of CTAs (sm90); sm80 has no clusters.
  auto longp = program_of(softmax_after_pointwise(100000));
  for (const auto& c : configs_of(longp, Arch::sm80)) EXPECT_FALSE(c.one_pass || c.cluster > 1) << c.text();
  for (const auto& c : configs_of(longp))
    if (c.one_pass) EXPECT_GT(c.cluster, 1) << c.text();
  // Rows of 16 (GroupNorm of 512 groups over 8192 channels, KernelBench level2/62's shape): neither a of mostly idle threads.
  // CTA of mostly idle threads, nor a warp of which 28 lanes idle: a few lanes per row, several rows per warp.
  auto shortprog = program_of(group_norm_hardtanh({1024, 8192}, 512));
  auto shortp = configs_of(shortprog);
  ASSERT_TRUE(shortp.at(0).warp_per_row) << shortp.at(0).text();
  EXPECT_LE(shortp[0].row_lanes * shortp[0].vec, 16) << shortp[0].text();
  EXPECT_GE(shortp[0].row_lanes * shortp[0].vec * 4, 32) << "at least a sector per access: " << shortp[0].text();
  std::string sub = realize::render_rowwise_kernel(shortprog, shortp[0], "t", "");
  EXPECT_NE(sub.find(fmt::format("constexpr int kRowLanes = {};", shortp[0].row_lanes)), std::string::npos);
  EXPECT_NE(sub.find("const int64_t row = live ? row_index : a.rows - 1;"), std::string::npos) << sub;
  EXPECT_NE(sub.find("if (live) store<V>"), std::string::npos) << "lanes past the last row write nothing";
  EXPECT_EQ(sub.find("if (row >= a.rows) return;"), std::string::npos) << "no lane leaves before the shuffles";
  auto back = realize::RowwiseKernelConfig::from_json(shortp[0].to_json());
  EXPECT_EQ(back.row_lanes, shortp[0].row_lanes);
  EXPECT_EQ(back.text(), shortp[0].text());
  // A whole warp per row keeps the id it had before rows could share a warp; rows as long as a warp's access
  // do not share one.
  auto warp = std::find_if(shortp.begin(), shortp.end(), [](const auto& c) { return c.warp_per_row && c.row_lanes == 32; });
  ASSERT_NE(warp, shortp.end());
  EXPECT_FALSE(warp->to_json().contains("row_lanes"));
  for (const auto& c : configs_of(program_of(group_norm_hardtanh({64, 4096}, 32))))
    EXPECT_EQ(c.warp_per_row ? c.row_lanes : 32, 32) << c.text();
  EXPECT_THROW(realize::RowwiseKernelConfig::from_json({{"threads", 256}, {"vec", 4}, {"warp_per_row", true},
                                                        {"one_pass", true}, {"row_lanes", 3}}),
               Error);
  EXPECT_THROW(realize::RowwiseKernelConfig::from_json({{"threads", 256}, {"vec", 4}, {"warp_per_row", false},
                                                        {"one_pass", true}, {"row_lanes", 4}}),
               Error);
  // One value per row after one reduction (a loss's per-row partials): reading each row once either way, the rows
  // stream through a CTA each instead of sitting in the registers of a cluster.
  GraphDoc hinge;
  hinge.input("p", {32768, 32768}).input("t", {32768});
  hinge.op("m", "aten.mul.Tensor", {ref_to("p"), ref_to("t")}, {32768, 32768});
  hinge.op("c", "aten.clamp_min.default", {ref_to("m"), 0}, {32768, 32768});
  hinge.op("mean", "aten.mean.default", {ref_to("c")}, {}).output("mean");
  auto partials = configs_of(program_of(hinge));
  EXPECT_FALSE(partials.at(0).one_pass) << partials.at(0).text();
  for (const auto& c : partials) EXPECT_FALSE(c.smem_row) << c.text();
  EXPECT_EQ(partials.at(0).cluster, 1) << partials.at(0).text();
}

// Scaled swish, then each row divided by its absmax (bench/problems/level2/swish_absmax_rows.py's chain).
GraphDoc swish_absmax(int64_t rows, int64_t cols) {
  GraphDoc d;
  d.input("x", {rows, cols});
  d.op("s", "aten.sigmoid.default", {ref_to("x")}, {rows, cols});
  d.op("m", "aten.mul.Tensor", {ref_to("x"), ref_to("s")}, {rows, cols});
  d.op("k", "aten.mul.Tensor", {ref_to("m"), 1.702}, {rows, cols});
  d.op("a", "aten.abs.default", {ref_to("k")}, {rows, cols});
  d.op("mx", "aten.amax.default", {ref_to("a"), Json::array({-1}), true}, {rows, 1});
  d.op("e", "aten.add.Tensor", {ref_to("mx"), 1e-6}, {rows, 1});
  d.op("y", "aten.div.Tensor", {ref_to("k"), ref_to("e")}, {rows, cols}).output("y");
  return d;
}

TEST(RowwiseGenerated, AOnePassRowKeepsInRegistersTheValuesItsLaterSweepsRead) {
  const auto prog = program_of(swish_absmax(64, 4096));
  const auto cs = configs_of(prog);
  // The kernel's own text, after the activation header (which defines times_sigmoid once).
  auto body = [&](const realize::RowwiseKernelConfig& c) {
    const std::string k = realize::render_rowwise_kernel(prog, c, "t", "");
    return k.substr(k.find("row_kernel(const FactRowwiseArgs a)"));
  };
  auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  auto one = std::find_if(cs.begin(), cs.end(), [](const auto& c) { return c.one_pass && !c.smem_row; });
  ASSERT_NE(one, cs.end());
  const std::string kept = body(*one);
  // The swish is computed once, in the absmax's sweep, and the division's sweep reads it from c_<var>.
  EXPECT_EQ(count(kept, "times_sigmoid"), 1u) << kept;
  const auto decl = kept.find("[kItems][V];", kept.find("float c_v"));
  ASSERT_NE(decl, std::string::npos) << kept;
  const std::string var = kept.substr(kept.find("float c_v") + 6, decl - kept.find("float c_v") - 6);
  EXPECT_EQ(count(kept, var + "[k][e] = "), 1u) << kept;
  EXPECT_EQ(count(kept, "= " + var + "[k][e];"), 1u) << kept;
  EXPECT_EQ(count(kept, "float c_v"), 1u) << "only what a later sweep reads is kept: " << kept;
  // The division by the row's absmax takes its reciprocal once a row (a per-row statement), then per element the
  // product and its correction.
  auto rcp = std::find_if(prog.statements.begin(), prog.statements.end(),
                          [](const auto& s) { return s.expr.find("fact_act::row_reciprocal(") != std::string::npos; });
  ASSERT_NE(rcp, prog.statements.end());
  EXPECT_TRUE(rcp->per_row);
  EXPECT_EQ(count(kept, "fact_act::div_by_reciprocal("), 1u) << kept;
  // A division by a number stays the division (its divisor is no row's value).
  GraphDoc by_number;
  by_number.input("x", {64, 4096});
  by_number.op("d", "aten.div.Tensor", {ref_to("x"), 3.0}, {64, 4096});
  by_number.op("s", "aten.softmax.int", {ref_to("d"), -1}, {64, 4096}).output("s");
  const auto np = program_of(by_number);
  for (const auto& s : np.statements)
    if (s.expr.find("3.0") != std::string::npos) EXPECT_NE(s.expr.find(" / "), std::string::npos) << s.expr;
  auto written = std::find_if(np.statements.begin(), np.statements.end(), [&](const auto& s) { return s.var == np.output; });
  ASSERT_NE(written, np.statements.end());
  EXPECT_NE(written->expr.find("div_by_reciprocal"), std::string::npos) << "softmax divides by its row's sum: " << written->expr;
  // Two passes over memory load the row again, and compute it again.
  auto two = std::find_if(cs.begin(), cs.end(), [](const auto& c) { return !c.one_pass; });
  ASSERT_NE(two, cs.end());
  const std::string again = body(*two);
  EXPECT_EQ(count(again, "times_sigmoid"), 2u) << again;
  EXPECT_EQ(again.find("float c_v"), std::string::npos) << again;
}

TEST(RowwiseGenerated, FewLongRowsTakeAClusterOfCTAsPerRow) {
  // 16 rows of 4M: a CTA per row would leave 116 of 132 SMs idle.
  auto few = configs_of(program_of(softmax_rows(16, 1 << 22)));
  EXPECT_EQ(few.at(0).cluster, 16) << few[0].text();
  EXPECT_FALSE(few[0].one_pass);
  std::string text = realize::render_rowwise_kernel(program_of(softmax_rows(16, 1 << 22)), few[0], "t", "");
  EXPECT_NE(text.find("__cluster_dims__(kCluster, 1, 1)"), std::string::npos);
  EXPECT_NE(text.find("constexpr int kCluster = 16;"), std::string::npos);
  EXPECT_NE(text.find("NonPortableClusterSizeAllowed"), std::string::npos);
  // Rows of 65535 fit in registers over a cluster of 4 (16 or 32 elements per thread): one read of memory.
  auto wide = configs_of(program_of(softmax_rows(32768, 65535)));
  EXPECT_TRUE(wide.at(0).one_pass) << wide[0].text();
  EXPECT_EQ(wide[0].cluster, 4);
  // 393216 would need 16 CTAs of 1024 threads at 24 elements each in registers (measured slower than two passes
  // over memory): passes over memory first, then the row in the shared memory of a cluster of 8 (192 KB a CTA),
  // read from HBM once (measured no faster on the H200; both are measured at --top 2).
  auto longer = configs_of(program_of(softmax_rows(4096, 393216)));
  EXPECT_FALSE(longer.at(0).one_pass) << longer[0].text();
  ASSERT_TRUE(longer.at(1).one_pass && longer[1].smem_row) << longer[1].text();
  EXPECT_EQ(longer[1].cluster, 8) << longer[1].text();
  EXPECT_EQ(longer[1].threads, 1024) << longer[1].text();
  for (const auto& c : longer) EXPECT_FALSE(c.one_pass && !c.smem_row && c.cluster == 16) << c.text();
  std::string staged = realize::render_rowwise_kernel(program_of(softmax_rows(4096, 393216)), longer[1], "t", "");
  for (const char* part : {"extern __shared__ float4 row_smem[];", "const SmemSlice<V> l0{reinterpret_cast<float*>(row_smem)",
                           "cudaFuncAttributeMaxDynamicSharedMemorySize", "row_kernel<kVec><<<grid, kThreads, row_smem_bytes(kVec), stream>>>"})
    EXPECT_NE(staged.find(part), std::string::npos) << part;
  EXPECT_TRUE(longer[1].to_json().at("smem_row").get<bool>());
  EXPECT_FALSE(longer[0].to_json().contains("smem_row"));
  EXPECT_TRUE(realize::RowwiseKernelConfig::from_json(longer[1].to_json()).smem_row);
  EXPECT_NE(longer[1].text().find("row in shared memory"), std::string::npos) << longer[1].text();
  for (const auto& c : configs_of(program_of(softmax_rows(4096, 393216)), Arch::sm80)) EXPECT_FALSE(c.smem_row) << c.text();
  // Rows that fit in registers, or of which streaming reads each once anyway, are not staged.
  for (const auto& c : wide) EXPECT_FALSE(c.smem_row) << c.text();
  EXPECT_THROW(realize::RowwiseKernelConfig::from_json({{"threads", 256}, {"vec", 4}, {"warp_per_row", false},
                                                        {"one_pass", false}, {"smem_row", true}}),
               Error);
  // Configs written before clusters existed keep their ids: no "cluster" key for a CTA per row.
  EXPECT_FALSE(few.back().to_json().contains("cluster") && few.back().cluster == 1);
  auto back = realize::RowwiseKernelConfig::from_json(wide[0].to_json());
  EXPECT_EQ(back.cluster, 4);
  EXPECT_THROW(realize::RowwiseKernelConfig::from_json({{"threads", 256}, {"vec", 4}, {"warp_per_row", true},
                                                        {"one_pass", false}, {"cluster", 2}}),
               Error);
}

void expect_generated_compiles(const GraphDoc& d, bool one_pass, const std::string& name, int cluster = 1,
                               int row_lanes = 0) {
  auto prog = program_of(d);
  auto cs = configs_of(prog);
  auto it = std::find_if(cs.begin(), cs.end(), [&](const auto& c) {
    return c.one_pass == one_pass && c.cluster == cluster && (!row_lanes || (c.warp_per_row && c.row_lanes == row_lanes));
  });
  ASSERT_NE(it, cs.end());
  std::string text = realize::render_rowwise_kernel(prog, *it, "rowwise_test_" + name, it->text());
  expect_kernel_compiles(Arch::sm90, text, name, it->text());
}

// cumsum / cumprod along the last dim (KernelBench level1/89, 90, 93's shapes, small): one generated scan kernel with
// the pointwise ops before and after it; a scan over a dim with others behind it, a second scan, a reduction beside a
// scan and a dtype conversion stay PyTorch's, each with its reason.
GraphDoc scan_chain(const char* op, std::vector<int64_t> shape, int64_t dim) {
  GraphDoc d;
  d.input("x", shape).input("m", shape);
  d.op("p", "aten.mul.Tensor", {ref_to("x"), ref_to("m")}, shape);
  d.op("c", op, {ref_to("p"), dim}, shape);
  d.op("y", "aten.add.Tensor", {ref_to("c"), ref_to("x")}, shape).output("y");
  return d;
}

// KernelBench level1/93's cumsum(x * mask), small: the bool mask is an input of the scan's kernel, read as 1 or 0.
GraphDoc masked_scan() {
  GraphDoc d;
  d.input("x", {64, 1024}).input("m", {64, 1024}, "bool");
  d.op("p", "aten.mul.Tensor", {ref_to("x"), ref_to("m")}, {64, 1024});
  d.op("c", "aten.cumsum.default", {ref_to("p"), 1}, {64, 1024}).output("c");
  return d;
}

TEST(RowwiseGenerated, ABoolMaskInputIsReadAsOneOrZero) {
  auto p = plan_of(masked_scan());
  const auto* e = generated(p);
  ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"p", "c"}));
  EXPECT_EQ(e->match.kernel["fragment"]["inputs"][1]["dtype"], "bool");
  EXPECT_FALSE(e->match.kernel["fragment"]["inputs"][0].contains("dtype"));  // the fragment's own: ids unchanged
  auto prog = discover::lower_row_program(e->match.kernel["fragment"]);
  EXPECT_EQ(prog.boolean, (std::vector<bool>{false, true}));
  std::string text = realize::render_rowwise_kernel(prog, configs_of(prog).at(0), "t", "");
  EXPECT_NE(text.find("const bool* in1 = static_cast<const bool*>(a.inputs[1])"), std::string::npos);
  EXPECT_NE(text.find("const int input_bytes[] = { int(sizeof(Element)), 1 };"), std::string::npos);
  // The agent's registered kernels take one dtype: a fragment with a mask is not offered to it.
  EXPECT_TRUE(discover::rowwise_candidates(p).empty());
  // An int mask stays PyTorch's (mixed dtypes).
  GraphDoc ints;
  ints.input("x", {64, 1024}).input("m", {64, 1024}, "int64");
  ints.op("p", "aten.mul.Tensor", {ref_to("x"), ref_to("m")}, {64, 1024});
  ints.op("c", "aten.cumsum.default", {ref_to("p"), 1}, {64, 1024}).output("c");
  EXPECT_TRUE(noted(plan_of(ints), "input 'm' is int64 but the output is float32"));
}

TEST(RowwiseGenerated, AScanAlongTheRowIsOneKernelWithTheOpsAroundIt) {
  for (const char* op : {"aten.cumsum.default", "aten.cumprod.default"}) {
    auto p = plan_of(scan_chain(op, {64, 1000}, 1));
    const auto* e = generated(p);
    ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
    EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"p", "c", "y"}));
    auto prog = discover::lower_row_program(e->match.kernel["fragment"]);
    ASSERT_NE(prog.scan(), nullptr);
    EXPECT_EQ(prog.scan()->reduce, std::string(op) == "aten.cumsum.default" ? "sum" : "prod");
    EXPECT_FALSE(prog.flat());
    EXPECT_FALSE(prog.output_per_row);
    EXPECT_EQ(prog.rows, 64);
    EXPECT_EQ(prog.cols, 1000);
    auto cs = configs_of(prog);
    ASSERT_FALSE(cs.empty());
    EXPECT_EQ(cs[0].vec * cs[0].items, 16);  // about 16 elements a thread in one tile
    EXPECT_EQ(cs[0].threads, 256);
    EXPECT_TRUE(cs[0].warp_per_row);  // rows of 1000: a CTA's 256 threads would idle past the row's end
    EXPECT_EQ(realize::RowwiseKernelConfig::from_json(cs[0].to_json()).items, cs[0].items);
    std::string text = realize::render_rowwise_kernel(prog, cs[0], "t", "");
    EXPECT_NE(text.find("scan_kernel<kVec>"), std::string::npos);
    EXPECT_NE(text.find(std::string(op) == "aten.cumsum.default" ? "OpSum{}, 0.0f" : "OpProd{}, 1.0f"), std::string::npos);
    EXPECT_NE(text.find("a->cols != 1000"), std::string::npos);  // the row length is the kernel's
    EXPECT_NE(text.find("(a->input_row_stride[i] % kVec == 0)"), std::string::npos);  // rows indexed from their start
  }
  // Long rows (KernelBench's 32768): a CTA per row first, a warp per row next.
  auto long_rows = configs_of(program_of(scan_chain("aten.cumsum.default", {64, 32768}, 1)));
  EXPECT_FALSE(long_rows.at(0).warp_per_row);
  EXPECT_EQ(long_rows.at(0).threads, 256);
  EXPECT_TRUE(long_rows.at(1).warp_per_row);
  // A rank-1 tensor is one row.
  GraphDoc one;
  one.input("x", {4097}).op("c", "aten.cumsum.default", {ref_to("x"), 0}, {4097}).output("c");
  auto po = plan_of(one);
  ASSERT_NE(generated(po), nullptr) << fmt::format("{}", fmt::join(po.notes, "\n"));
  EXPECT_EQ(discover::lower_row_program(generated(po)->match.kernel["fragment"]).rows, 1);

  // Over dim 1 of [8, 16, 32]: strided rows, not generated.
  auto strided = plan_of(scan_chain("aten.cumsum.default", {8, 16, 32}, 1));
  EXPECT_TRUE(noted(strided, "which has dims behind it")) << fmt::format("{}", fmt::join(strided.notes, "\n"));
  EXPECT_EQ(generated(strided) == nullptr || std::find(generated(strided)->match.nodes.begin(),
                                                       generated(strided)->match.nodes.end(), "c") ==
                                                 generated(strided)->match.nodes.end(), true);
  // Two scans in a row: the second is another kernel's.
  GraphDoc two;
  two.input("x", {16, 64});
  two.op("a", "aten.cumsum.default", {ref_to("x"), -1}, {16, 64});
  two.op("b", "aten.cumsum.default", {ref_to("a"), -1}, {16, 64}).output("b");
  auto pt = plan_of(two);
  EXPECT_TRUE(noted(pt, "is a second scan")) << fmt::format("{}", fmt::join(pt.notes, "\n"));
  // A reduction of the scanned row.
  GraphDoc red;
  red.input("x", {16, 64});
  red.op("a", "aten.cumsum.default", {ref_to("x"), -1}, {16, 64});
  red.op("s", "aten.sum.dim_IntList", {ref_to("a"), Json::array({-1}), false}, {16}).output("s");
  auto pr = plan_of(red);
  EXPECT_TRUE(noted(pr, "reduces a row that a scan also walks")) << fmt::format("{}", fmt::join(pr.notes, "\n"));
  // A dtype argument.
  GraphDoc conv;
  conv.input("x", {16, 64});
  conv.op("a", "aten.cumsum.default", {ref_to("x"), -1}, {16, 64}, "float32", Json{{"dtype", "torch.float64"}}).output("a");
  auto pc = plan_of(conv);
  EXPECT_EQ(generated(pc), nullptr);
  EXPECT_TRUE(noted(pc, "converts to another dtype")) << fmt::format("{}", fmt::join(pc.notes, "\n"));
}

// A reverse cumsum as KernelBench level1/91 writes it, flip(cumsum(flip(x))): one scan kernel reading x and writing
// its output from the row's end. A flip without a scan, of a value made in the fragment, or of an input also read
// unflipped stays PyTorch's.
GraphDoc reverse_cumsum(bool add_unflipped_x) {
  GraphDoc d;
  d.input("x", {64, 1024});
  d.op("f", "aten.flip.default", {ref_to("x"), Json::array({1})}, {64, 1024});
  d.op("c", "aten.cumsum.default", {ref_to("f"), 1}, {64, 1024});
  if (add_unflipped_x) {
    d.op("a", "aten.add.Tensor", {ref_to("c"), ref_to("x")}, {64, 1024});
    d.op("g", "aten.flip.default", {ref_to("a"), Json::array({1})}, {64, 1024}).output("g");
  } else {
    d.op("g", "aten.flip.default", {ref_to("c"), Json::array({1})}, {64, 1024}).output("g");
  }
  return d;
}

TEST(RowwiseGenerated, AReverseScanReadsAndWritesFromTheRowsEnd) {
  auto p = plan_of(reverse_cumsum(false));
  const auto* e = generated(p);
  ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"f", "c", "g"}));
  auto prog = discover::lower_row_program(e->match.kernel["fragment"]);
  ASSERT_NE(prog.scan(), nullptr);
  EXPECT_EQ(prog.reversed, std::vector<bool>{true});
  EXPECT_TRUE(prog.output_reversed);
  std::string text = realize::render_rowwise_kernel(prog, configs_of(prog).at(0), "t", "");
  EXPECT_NE(text.find("load<V>(in0, kCols - col0 - V, r)"), std::string::npos);
  EXPECT_NE(text.find("store<V>(out, kCols - col0 - V, z)"), std::string::npos);

  // Why a set of nodes is no scan kernel: the lowering's message.
  auto refusal = [](const GraphDoc& d, const std::vector<std::string>& nodes) -> std::string {
    ir::Graph g = d.graph();
    try {
      discover::lower_row_program(discover::fragment_to_json(g, discover::make_rowwise_fragment(g, nodes, {})));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  // x read flipped by the scan and as it is by the add: one way only; the plan cuts the flips off (PyTorch's).
  EXPECT_NE(refusal(reverse_cumsum(true), {"f", "c", "a", "g"}).find("an input is read one way"), std::string::npos);
  auto both = plan_of(reverse_cumsum(true));
  ASSERT_NE(generated(both), nullptr);
  EXPECT_EQ(generated(both)->match.nodes, (std::vector<std::string>{"c", "a"}));
  EXPECT_TRUE(noted(both, "f left to PyTorch: the fragment flips its rows without a scan"));
  // A flip alone: PyTorch's copy.
  GraphDoc alone;
  alone.input("x", {8, 32});
  alone.op("f", "aten.flip.default", {ref_to("x"), Json::array({1})}, {8, 32});
  alone.op("r", "aten.relu.default", {ref_to("f")}, {8, 32}).output("r");
  auto pa = plan_of(alone);
  EXPECT_TRUE(noted(pa, "reverses a row only around a scan")) << fmt::format("{}", fmt::join(pa.notes, "\n"));
  ASSERT_NE(generated(pa), nullptr);  // the relu alone
  EXPECT_EQ(generated(pa)->match.nodes, std::vector<std::string>{"r"});
  // A flip of a value made in the fragment, not its output.
  GraphDoc mid;
  mid.input("x", {8, 32});
  mid.op("c", "aten.cumsum.default", {ref_to("x"), 1}, {8, 32});
  mid.op("f", "aten.flip.default", {ref_to("c"), Json::array({1})}, {8, 32});
  mid.op("r", "aten.relu.default", {ref_to("f")}, {8, 32}).output("r");
  EXPECT_NE(refusal(mid, {"c", "f", "r"}).find("flips a value made in the fragment"), std::string::npos);
  // A flip of another dim.
  GraphDoc other;
  other.input("x", {8, 32});
  other.op("f", "aten.flip.default", {ref_to("x"), Json::array({0})}, {8, 32});
  other.op("c", "aten.cumsum.default", {ref_to("f"), 1}, {8, 32}).output("c");
  auto po = plan_of(other);
  EXPECT_TRUE(noted(po, "reverses only its rows' one dim")) << fmt::format("{}", fmt::join(po.notes, "\n"));
}

// BatchNorm in eval (DenseNet's BN before each ReLU and conv, KernelBench level1/33 alone): its four [C] vectors are
// channel inputs read by dim 1, also where a row has C elements; over [N, C] they are the row every row shares. In
// training mode it stays PyTorch's.
GraphDoc batch_norm_relu(std::vector<int64_t> shape, bool training = false) {
  GraphDoc d;
  const int64_t c = shape[1];
  d.input("x", shape);
  for (const char* v : {"w", "b", "m", "v"}) d.input(v, {c}, "float32", "buffer");
  d.op("bn", "aten.batch_norm.default",
       {ref_to("x"), ref_to("w"), ref_to("b"), ref_to("m"), ref_to("v"), training, 0.1, 1e-5, true}, shape);
  d.op("r", "aten.relu.default", {ref_to("bn")}, shape).output("r");
  return d;
}

// The exclusive cumsum as KernelBench level1/92 writes it, cat(zeros_like(x[:, :1]), cumsum(x.narrow(1, 0, n - 1))),
// small: the scan's kernel writes the pad column too (the cat and its fill are the kernel's; the narrow stays a view).
GraphDoc exclusive_cumsum(int64_t rows, int64_t cols) {
  GraphDoc d;
  d.input("x", {rows, cols});
  d.op("narrow", "aten.narrow.default", {ref_to("x"), 1, 0, cols - 1}, {rows, cols - 1});
  d.op("cumsum", "aten.cumsum.default", {ref_to("narrow"), 1}, {rows, cols - 1});
  d.op("select", "aten.select.int", {ref_to("x"), 1, 0}, {rows});
  d.op("unsqueeze", "aten.unsqueeze.default", {ref_to("select"), 1}, {rows, 1});
  d.op("zeros_like", "aten.zeros_like.default", {ref_to("unsqueeze")}, {rows, 1});
  d.op("cat", "aten.cat.default", {Json::array({ref_to("zeros_like"), ref_to("cumsum")}), 1}, {rows, cols}).output("cat");
  return d;
}

TEST(RowwiseGenerated, AScansPadOfConstantColumnsIsWrittenByItsKernel) {
  auto p = plan_of(exclusive_cumsum(64, 100));
  const auto* e = generated(p);
  ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"cumsum", "zeros_like", "cat"}));
  EXPECT_EQ(e->match.anchor, "cat");
  EXPECT_TRUE(noted(p, "cat (aten.cat.default) pads the rows of cumsum")) << fmt::format("{}", fmt::join(p.notes, "\n"));
  const auto& fragment = e->match.kernel["fragment"];
  EXPECT_EQ(fragment["output"], "cat");
  EXPECT_EQ(fragment["nodes"].back()["op"], "aten.constant_pad_nd.default");  // what the float64 replay runs
  EXPECT_EQ(fragment["nodes"].back()["args"][1], Json::array({1, 0}));
  EXPECT_EQ(fragment["inputs"].size(), 1u);  // the narrow's rows; the fill's shape source is no input
  auto prog = discover::lower_row_program(fragment);
  EXPECT_EQ(prog.cols, 99);
  EXPECT_EQ(prog.pad_lo, 1);
  EXPECT_EQ(prog.pad_hi, 0);
  EXPECT_EQ(prog.out_cols(), 100);
  // Rows of 99 padded by one before: the exclusive scan of 100 columns, 16-byte aligned (the row's last access loads
  // element by element, its first column is the pad's).
  std::string text = realize::render_rowwise_kernel(prog, configs_of(prog).at(0), "t", "");
  EXPECT_NE(text.find("tile_scan<V, true>"), std::string::npos);
  EXPECT_NE(text.find("base < kCols + 1;"), std::string::npos);
  EXPECT_NE(text.find("if (col0 + V <= kCols)"), std::string::npos);
  EXPECT_NE(text.find("if (col0 == 0) y[0] = 0.000000000e+00f;"), std::string::npos);
  EXPECT_NE(text.find("a->output_row_stride != 100"), std::string::npos);
  EXPECT_NE(text.find("(a->cols + 1) % kVec == 0 && 0 % kVec == 0"), std::string::npos);
  EXPECT_EQ(text.find("out += "), std::string::npos);  // the exclusive form writes from the pad's column
  EXPECT_EQ(text.find("// the row's pads"), std::string::npos);  // no other pad column
  std::string wrapper = generated_op_wrapper(exclusive_cumsum(64, 100));
  EXPECT_NE(wrapper.find("if (1 > 0) sizes.back() += 1;"), std::string::npos);
  EXPECT_NE(wrapper.find("args.output_row_stride = 100;"), std::string::npos);

  // constant_pad_nd of 2 and 3 columns of 1.5: the inclusive scan written 2 columns in (its stores not 16-byte
  // aligned: the scalar instance runs).
  GraphDoc padded;
  padded.input("x", {8, 64});
  padded.op("c", "aten.cumprod.default", {ref_to("x"), -1}, {8, 64});
  padded.op("p", "aten.constant_pad_nd.default", {ref_to("c"), Json::array({2, 3}), 1.5}, {8, 69}).output("p");
  auto pp = plan_of(padded);
  ASSERT_NE(generated(pp), nullptr) << fmt::format("{}", fmt::join(pp.notes, "\n"));
  EXPECT_EQ(generated(pp)->match.nodes, (std::vector<std::string>{"c", "p"}));
  auto pprog = discover::lower_row_program(generated(pp)->match.kernel["fragment"]);
  EXPECT_EQ(pprog.pad_value, "1.500000000e+00f");
  std::string ptext = realize::render_rowwise_kernel(pprog, configs_of(pprog).at(0), "t", "");
  EXPECT_NE(ptext.find("tile_scan<V, false>"), std::string::npos);
  EXPECT_NE(ptext.find("c < 2 + 3; c += kRowThreads) out[c < 2 ? c : kCols + 0 + c] = from_float<Element>(1.500000000e+00f)"),
            std::string::npos) << ptext.substr(ptext.find("scan_kernel"), 1500);
  EXPECT_NE(ptext.find("out += 2;"), std::string::npos);

  // An op after the scan that reads the row's elements (x at the scan's column) keeps the inclusive form.
  GraphDoc reads;
  reads.input("x", {8, 63});
  reads.op("c", "aten.cumsum.default", {ref_to("x"), 1}, {8, 63});
  reads.op("m", "aten.mul.Tensor", {ref_to("c"), ref_to("x")}, {8, 63});
  reads.op("z", "aten.zeros.default", Json::array({Json::array({8, 1})}), {8, 1});
  reads.op("cat", "aten.cat.default", {Json::array({ref_to("z"), ref_to("m")}), -1}, {8, 64}).output("cat");
  auto pr = plan_of(reads);
  ASSERT_NE(generated(pr), nullptr) << fmt::format("{}", fmt::join(pr.notes, "\n"));
  EXPECT_EQ(generated(pr)->match.nodes, (std::vector<std::string>{"c", "m", "z", "cat"}));
  auto rprog = discover::lower_row_program(generated(pr)->match.kernel["fragment"]);
  std::string rtext = realize::render_rowwise_kernel(rprog, configs_of(rprog).at(0), "t", "");
  EXPECT_NE(rtext.find("tile_scan<V, false>"), std::string::npos);
  EXPECT_NE(rtext.find("out += 1;"), std::string::npos);

  // A pad after a kernel that is no scan stays PyTorch's (that kernel is still generated); a cat along another dim, or
  // of a fill another op reads too, is no pad.
  GraphDoc soft;
  soft.input("x", {8, 64});
  soft.op("s", "aten.softmax.int", {ref_to("x"), -1}, {8, 64});
  soft.op("p", "aten.constant_pad_nd.default", {ref_to("s"), Json::array({0, 4})}, {8, 68}).output("p");
  auto ps = plan_of(soft);
  ASSERT_NE(generated(ps), nullptr);
  EXPECT_EQ(generated(ps)->match.nodes, std::vector<std::string>{"s"});
  EXPECT_TRUE(noted(ps, "p (aten.constant_pad_nd.default) stays PyTorch's: the fragment pads its rows without a scan"))
      << fmt::format("{}", fmt::join(ps.notes, "\n"));
  GraphDoc rows;
  rows.input("x", {8, 64});
  rows.op("c", "aten.cumsum.default", {ref_to("x"), 1}, {8, 64});
  rows.op("z", "aten.zeros.default", Json::array({Json::array({1, 64})}), {1, 64});
  rows.op("cat", "aten.cat.default", Json::array({Json::array({ref_to("z"), ref_to("c")})}), {9, 64}).output("cat");
  auto prow = plan_of(rows);
  ASSERT_NE(generated(prow), nullptr);
  EXPECT_EQ(generated(prow)->match.nodes, std::vector<std::string>{"c"});
  GraphDoc shared = exclusive_cumsum(8, 64);
  shared.op("r", "aten.add.Tensor", {ref_to("cat"), ref_to("zeros_like")}, {8, 64}).output("r");
  auto psh = plan_of(shared);
  ASSERT_NE(generated(psh), nullptr);
  EXPECT_EQ(std::count(generated(psh)->match.nodes.begin(), generated(psh)->match.nodes.end(), "cat"), 0);
}

TEST(RowwiseGenerated, BatchNormInEvalReadsItsVectorsByChannel) {
  for (auto shape : {std::vector<int64_t>{2, 64, 8, 32}, std::vector<int64_t>{2, 64, 8, 64}}) {  // rows of 32, of C
    auto p = plan_of(batch_norm_relu(shape));
    const auto* e = generated(p);
    ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
    EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"bn", "r"}));
    auto prog = discover::lower_row_program(e->match.kernel["fragment"]);
    EXPECT_TRUE(prog.flat());
    ASSERT_EQ(prog.inputs.size(), 5u);
    for (size_t i = 1; i < 5; ++i) {
      EXPECT_EQ(prog.inputs[i], discover::RowInputKind::channel) << i;
      EXPECT_EQ(prog.channel[i].channels, 64);
      EXPECT_EQ(prog.channel[i].inner, 8 * shape[3]);
    }
    std::string text = realize::render_rowwise_kernel(prog, configs_of(prog).at(0), "t", "");
    EXPECT_NE(text.find("rsqrtf("), std::string::npos);
  }
  // BatchNorm1d over [N, C]: the vectors are the shared row.
  auto p2 = plan_of(batch_norm_relu({16, 64}));
  ASSERT_NE(generated(p2), nullptr) << fmt::format("{}", fmt::join(p2.notes, "\n"));
  auto prog2 = discover::lower_row_program(generated(p2)->match.kernel["fragment"]);
  EXPECT_EQ(prog2.inputs[1], discover::RowInputKind::row_broadcast);
  // Training mode: a reduction over N, H, W.
  auto pt = plan_of(batch_norm_relu({2, 64, 8, 32}, true));
  EXPECT_TRUE(noted(pt, "BatchNorm in training mode")) << fmt::format("{}", fmt::join(pt.notes, "\n"));
  ASSERT_NE(generated(pt), nullptr);
  EXPECT_EQ(generated(pt)->match.nodes, std::vector<std::string>{"r"});
}

TEST(RowwiseGenerated, FlatKernelTakesAnyLengthOnlyWithoutABroadcastRow) {
  GraphDoc one;
  one.input("x", {4, 8}, "bfloat16").op("r", "aten.relu.default", {ref_to("x")}, {4, 8}, "bfloat16").output("r");
  auto relu = discover::lower_row_program(generated(plan_of(one))->match.kernel["fragment"]);
  auto c = configs_of(relu).at(0);
  EXPECT_EQ(c.vec, 8);  // 16 bytes of bf16
  std::string text = realize::render_rowwise_kernel(relu, c, "t", "");
  EXPECT_NE(text.find("a->cols < 1"), std::string::npos);          // any row length
  EXPECT_NE(text.find("one thread each"), std::string::npos);       // the scalar tail
  EXPECT_NE(text.find("% (input_bytes[i] * kVec) == 0) &&\n              (true);"), std::string::npos);  // one array: any cols
  auto chain = discover::lower_row_program(generated(plan_of(pointwise_chain()))->match.kernel["fragment"]);
  std::string bt = realize::render_rowwise_kernel(chain, c, "t", "");
  EXPECT_NE(bt.find("a->cols != 100"), std::string::npos);  // the broadcast row fixes the length
  EXPECT_NE(bt.find("i % a.cols"), std::string::npos);
}

// The generated op of a plan's row-wise entry, as the op library writes it.
std::string generated_op_wrapper(const GraphDoc& d) {
  auto p = plan_of(d);
  const auto* e = generated(p);
  if (!e) throw Error("no generated row-wise entry");
  const auto* family = realize::kernel_family_for(e->match);
  auto problem = family->problem_from_match(e->match, p.graph, Numerics::fp32, Arch::sm90);
  return family->op_wrapper(family->candidates(problem, 1).ranked.at(0).config);
}

// cross_entropy(x, t) as the tracer decomposes it (KernelBench level1/95, small): log_softmax, the target's log
// probability by a gather, its negation where the target is not ignored; the int64 and bool ops on the targets and
// the final sum stay PyTorch's (a [rows] tensor each).
GraphDoc cross_entropy(int64_t rows, int64_t cols) {
  GraphDoc d;
  d.input("x", {rows, cols}).input("t", {rows}, "int64");
  d.op("lsm", "aten._log_softmax.default", {ref_to("x"), 1, false}, {rows, cols});
  d.op("ne", "aten.ne.Scalar", {ref_to("t"), -100}, {rows}, "bool");
  d.op("w0", "aten.where.ScalarOther", {ref_to("ne"), ref_to("t"), 0}, {rows}, "int64");
  d.op("u", "aten.unsqueeze.default", {ref_to("w0"), 1}, {rows, 1}, "int64");
  d.op("g", "aten.gather.default", {ref_to("lsm"), 1, ref_to("u")}, {rows, 1});
  d.op("s", "aten.squeeze.dim", {ref_to("g"), 1}, {rows});
  d.op("n", "aten.neg.default", {ref_to("s")}, {rows});
  d.op("ne1", "aten.ne.Scalar", {ref_to("t"), -100}, {rows}, "bool");
  d.op("w1", "aten.where.ScalarOther", {ref_to("ne1"), ref_to("n"), 0}, {rows});
  d.op("sum", "aten.sum.default", {ref_to("w1")}, {}).output("sum");
  return d;
}

// Few long rows (Hugging Face GPT-2's loss: 4 x 255 targets over 50257 logits) take a cluster a row, one pass in
// registers; 1024-thread CTAs rank behind 512 (measured 0.286 vs 0.176 ms on the H200: alone on an SM, a CTA's
// loads stop at every reduction barrier).
TEST(RowwiseGenerated, FewLongRowsRankAOnePassClusterOf512ThreadCtasFirst) {
  const auto cs = configs_of(program_of(cross_entropy(1020, 50257)));
  ASSERT_FALSE(cs.empty());
  EXPECT_TRUE(cs[0].one_pass && !cs[0].smem_row) << cs[0].text();
  EXPECT_EQ(cs[0].threads, 512) << cs[0].text();
  EXPECT_EQ(cs[0].cluster, 4) << cs[0].text();
}

TEST(RowwiseGenerated, ACrossEntropyPicksEachRowsTargetByItsIndexInOneKernel) {
  auto p = plan_of(cross_entropy(64, 1000));
  const auto* e = generated(p);
  ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"lsm", "g", "s", "n", "w1"}));  // the squeeze joins its gather
  const Json& f = e->match.kernel["fragment"];
  ASSERT_EQ(f["inputs"].size(), 3u);
  EXPECT_EQ(f["inputs"][1]["name"], "u");
  EXPECT_EQ(f["inputs"][1]["dtype"], "int64");
  EXPECT_EQ(f["inputs"][1]["per_row"], true);
  EXPECT_EQ(f["inputs"][2]["dtype"], "bool");  // the mask of kept targets, [rows]
  EXPECT_EQ(f["inputs"][2]["per_row"], true);
  auto prog = discover::lower_row_program(f);
  EXPECT_EQ(prog.inputs, (std::vector<discover::RowInputKind>{discover::RowInputKind::full, discover::RowInputKind::per_row,
                                                               discover::RowInputKind::per_row}));
  EXPECT_EQ(prog.index, (std::vector<bool>{false, true, false}));
  EXPECT_TRUE(prog.output_per_row);
  auto pick = std::find_if(prog.statements.begin(), prog.statements.end(),
                           [](const auto& st) { return st.kind == discover::RowStatement::Kind::reduce && st.reduce == "pick"; });
  ASSERT_NE(pick, prog.statements.end());
  EXPECT_EQ(pick->input, 1);
  auto cs = configs_of(prog);
  ASSERT_FALSE(cs.empty());
  EXPECT_TRUE(cs[0].one_pass);  // rows of 1000 in registers: the pick is a third sweep over them, not over memory
  std::string text = realize::render_rowwise_kernel(prog, cs[0], "t", "");
  EXPECT_NE(text.find("const int64_t* in1 = static_cast<const int64_t*>(a.inputs[1]) + row;"), std::string::npos);
  EXPECT_NE(text.find("if (ix1 < 0 || ix1 >= kCols)"), std::string::npos);  // an index outside the row stops the kernel
  EXPECT_NE(text.find("__trap();"), std::string::npos);
  // The thread passing the target's column keeps its log probability and stores the row's loss itself (no reduction
  // of the pick).
  EXPECT_NE(text.find("if (col0 + e == ix1) { a_v5 = v4; own_v5 = true; }"), std::string::npos) << text.substr(text.find("row_kernel("));
  EXPECT_NE(text.find("if (own_v5"), std::string::npos);  // the owning thread stores
  EXPECT_NE(text.find("= to_float(in2[0]);"), std::string::npos);  // the mask read once a row
  EXPECT_EQ(text.find("l1["), std::string::npos);  // per-row inputs are not swept
  EXPECT_NE(text.find("const int input_bytes[] = { int(sizeof(Element)), 0, 0 };"), std::string::npos);
  std::string op = generated_op_wrapper(cross_entropy(64, 1000));
  EXPECT_NE(op.find("const c10::ScalarType dtypes[] = { at::kFloat, at::kLong, at::kBool };"), std::string::npos);
  EXPECT_NE(op.find("const bool per_row[] = { false, true, true };"), std::string::npos);
  EXPECT_TRUE(discover::rowwise_candidates(p).empty());  // outside the agent's one-dtype ABI

  // A gather along another dim than the rows', an index read as a value, a per-row input without the row's dims read
  // with full values, and a per-row input of a kernel without a reduction stay PyTorch's, each with its reason.
  GraphDoc cols;
  cols.input("x", {64, 100}).input("i", {1, 100}, "int64");
  cols.op("l", "aten._log_softmax.default", {ref_to("x"), 1, false}, {64, 100});
  cols.op("g", "aten.gather.default", {ref_to("l"), 0, ref_to("i")}, {1, 100}).output("g");
  EXPECT_EQ(generated(plan_of(cols)) == nullptr ||
                generated(plan_of(cols))->match.nodes == std::vector<std::string>{"l"}, true);
  GraphDoc value;
  value.input("x", {64, 100}).input("i", {64, 1}, "int64");
  value.op("l", "aten._log_softmax.default", {ref_to("x"), 1, false}, {64, 100});
  value.op("a", "aten.add.Tensor", {ref_to("l"), ref_to("i")}, {64, 100}).output("a");
  EXPECT_TRUE(noted(plan_of(value), "input 'i' is int64 but the output is float32")) << fmt::format("{}", fmt::join(plan_of(value).notes, "\n"));
  GraphDoc dropped;
  dropped.input("x", {64, 64}).input("r", {64});
  dropped.op("s", "aten.softmax.int", {ref_to("x"), 1}, {64, 64});
  dropped.op("m", "aten.mul.Tensor", {ref_to("s"), ref_to("r")}, {64, 64}).output("m");  // r broadcasts as a row here
  auto pd = plan_of(dropped);
  ASSERT_NE(generated(pd), nullptr);
  EXPECT_EQ(generated(pd)->match.kernel["fragment"]["inputs"][1].value("per_row", false), false);
  EXPECT_EQ(generated(pd)->match.kernel["fragment"]["inputs"][1]["broadcast"], true);  // PyTorch's row broadcast
  GraphDoc scan;  // a scan's kernel walks rows without owning a row's values at its start
  scan.input("x", {64, 1000}).input("r", {64, 1});
  scan.op("c", "aten.cumsum.default", {ref_to("x"), 1}, {64, 1000});
  scan.op("m", "aten.mul.Tensor", {ref_to("c"), ref_to("r")}, {64, 1000}).output("m");
  auto pf = plan_of(scan);
  EXPECT_TRUE(noted(pf, "reads a per-row input without reducing its rows")) << fmt::format("{}", fmt::join(pf.notes, "\n"));
}

TEST(RowwiseGenerated, OpWrappersOfStridedAndContiguousRowsParseAgainstTorchHeaders) {
  GraphDoc sum;  // one value per strided row, keepdim: [8, 1, 32]
  sum.input("x", {8, 16, 32});
  sum.op("s", "aten.sum.dim_IntList", {ref_to("x"), Json::array({1}), true}, {8, 1, 32}).output("s");
  std::string strided = generated_op_wrapper(sum);
  EXPECT_NE(strided.find("trailing = 1, inner_dims = 1, inner = 32"), std::string::npos);
  std::string rms = generated_op_wrapper(rms_over_channels(4, 64, 1000));
  // logsumexp over the channels of a pooled [N, C, 1, 1] (KernelBench level2/42): the rows are contiguous, but the
  // op must still drop the reduced dim 1, not the last one.
  GraphDoc pooled;
  pooled.input("x", {16, 128, 1, 1});
  pooled.op("l", "aten.logsumexp.default", {ref_to("x"), Json::array({1}), true}, {16, 1, 1, 1}).output("l");
  std::string lse = generated_op_wrapper(pooled);
  EXPECT_NE(lse.find("trailing = 1, inner_dims = 2, inner = 1"), std::string::npos) << lse.substr(0, 2000);
  std::string pool = generated_op_wrapper(max_pool_mish());
  EXPECT_NE(pool.find("window[] = { {2, 8, 10, 10} }"), std::string::npos) << pool.substr(0, 2000);
  std::string gn = generated_op_wrapper(group_norm_hardtanh({16, 64}, 8));
  EXPECT_NE(gn.find("const int64_t channels[] = { 0, 64, 64 };"), std::string::npos) << gn.substr(0, 2000);
  // A scan takes a view of rows a stride apart (a narrow of the last dim); a bool mask input is checked as bool.
  std::string masked = generated_op_wrapper(masked_scan());
  EXPECT_NE(masked.find("const c10::ScalarType dtypes[] = { at::kFloat, at::kBool };"), std::string::npos) << masked.substr(0, 2000);
  EXPECT_NE(masked.find("if (!true || t.dim() < 2"), std::string::npos);  // row views taken
  EXPECT_NE(strided.find("if (!false || t.dim() < 2"), std::string::npos);  // strided rows: other layouts copied
  const std::string torch_dir = torch_package_dir();
  if (torch_dir.empty()) GTEST_SKIP() << "no torch headers in " << fact::python_exe();
  fs::path dir = fs::temp_directory_path() / "fact_test_rowwise_wrapper";
  fs::create_directories(dir);
  std::ofstream(dir / "ops.cpp") << realize::op_library_source({strided, rms, lse, gn, pool, masked,
                                                                generated_op_wrapper(softmax_rows(8, 100)),
                                                                generated_op_wrapper(cross_entropy(64, 1000)),
                                                                generated_op_wrapper(exclusive_cumsum(64, 100))}).text;
  auto r = parse_against_torch(torch_dir, dir / "ops.cpp", realize::kernel_abi_include_dir());
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 4000);
}

// A pool alone over [2, 3, in...] (rank 2 + spatial): its generated kernel's pool, compiled by nvcc and run on the host
// (window<i> and window<i>_run are host-device), against PyTorch's definitions of max and average pools written out
// here: every element by itself, and runs of 4 from every position (those crossing a row, or whose windows leave the
// input, go element by element); the same float operations in the same order, so equal bits (NaN for NaN).
struct PoolCase {
  std::string name, op;
  std::vector<int64_t> in, out, kernel, stride, padding, dilation;
  bool count_include_pad = true;
  int64_t divisor = 0;
};

void expect_pool_runs_as_pytorch_on_the_host(const PoolCase& c) {
  GraphDoc d;
  std::vector<int64_t> in = {2, 3}, out = {2, 3};
  in.insert(in.end(), c.in.begin(), c.in.end());
  out.insert(out.end(), c.out.begin(), c.out.end());
  Json args = {ref_to("x"), c.kernel, c.stride, c.padding};
  const bool max = c.op.find("max_pool") != std::string::npos;
  if (max) args.push_back(c.dilation);
  else args.insert(args.end(), {false, c.count_include_pad});
  if (!max && c.op != "aten.avg_pool1d.default") args.push_back(c.divisor ? Json(c.divisor) : Json(nullptr));
  d.input("x", in).op("p", c.op, args, out).output("p");
  auto prog = program_of(d);
  ASSERT_EQ(prog.inputs.at(0), discover::RowInputKind::window);
  const auto cfg = configs_of(prog).at(0);
  ASSERT_EQ(cfg.vec, 4);
  std::string text = realize::render_rowwise_kernel(prog, cfg, "pool_" + c.name, "");
  auto three = [](std::vector<int64_t> v, int64_t fill) {
    v.insert(v.begin(), 3 - v.size(), fill);
    return fmt::format("{}", fmt::join(v, ", "));
  };
  const int mode = max ? 0 : c.divisor ? 3 : c.count_include_pad ? 1 : 2;
  text += fmt::format(R"(
#include <cmath>
#include <cstdio>
#include <vector>
int main() {{
  using namespace fact_pool_{0};
  const int I[3] = {{{1}}}, O[3] = {{{2}}}, K[3] = {{{3}}}, S[3] = {{{4}}}, P[3] = {{{5}}}, D[3] = {{{6}}};
  const int mode = {7};
  const float divisor = {8}.0f;
  const int outer = 6, plane = I[0] * I[1] * I[2], opl = O[0] * O[1] * O[2];
  std::vector<float> x(size_t(outer) * plane);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i)) * 3.0f;
  x[plane + 5] = NAN;  // a NaN propagates through the windows that hold it
  auto same = [](float a, float b) {{ return (std::isnan(a) && std::isnan(b)) || a == b; }};
  // PyTorch's definitions (aten/src/ATen/native/cpu: max_pool, avg_pool), element f of the output [6, O...].
  auto reference = [&](int64_t f) {{
    const int n = int(f / opl), o2 = int(f % O[2]), o1 = int(f / O[2] % O[1]), o0 = int(f / (O[1] * O[2]) % O[0]);
    const int o[3] = {{o0, o1, o2}};
    int start[3], end[3], pool_size = 1, valid = 1;
    for (int d = 0; d < 3; ++d) {{
      start[d] = o[d] * S[d] - P[d];
      end[d] = mode == 0 ? start[d] + (K[d] - 1) * D[d] + 1 : std::min(start[d] + K[d], I[d] + P[d]);
      pool_size *= end[d] - start[d];
    }}
    float m = -INFINITY, sum = 0.0f;
    for (int a = start[0]; a < end[0]; a += D[0])
      for (int b = start[1]; b < end[1]; b += D[1])
        for (int c = start[2]; c < end[2]; c += D[2]) {{
          if (a < 0 || a >= I[0] || b < 0 || b >= I[1] || c < 0 || c >= I[2]) continue;
          const float v = x[size_t(n) * plane + (size_t(a) * I[1] + b) * I[2] + c];
          if (v > m || std::isnan(v)) m = v;
          sum += v;
        }}
    for (int d = 0; d < 3; ++d) valid *= std::min(end[d], I[d]) - std::max(start[d], 0);
    return mode == 0 ? m : mode == 1 ? sum / float(pool_size) : mode == 2 ? sum / float(valid) : sum / divisor;
  }};
  int bad = 0;
  const int64_t total = int64_t(outer) * opl;
  for (int64_t f = 0; f < total; ++f) {{
    const float want = reference(f), got = window0(x.data(), f);
    if (!same(got, want) && bad++ < 5) std::printf("element %lld: %g, PyTorch's definition %g\n", (long long)f, got, want);
    if (f + 4 > total) continue;
    float run[4];
    window0_run<4>(x.data(), f, run);
    for (int e = 0; e < 4; ++e)
      if (!same(run[e], window0(x.data(), f + e)) && bad++ < 5)
        std::printf("run at %lld, element %d: %g, element by element %g\n", (long long)f, e, run[e], window0(x.data(), f + e));
  }}
  std::printf("%d mismatches over %lld elements\n", bad, (long long)total);
  return bad != 0;
}}
)", c.name, three(c.in, 1), three(c.out, 1), three(c.kernel, 1), three(c.stride, 1), three(c.padding, 0),
                      three(c.dilation.empty() ? std::vector<int64_t>(c.in.size(), 1) : c.dilation, 1), mode,
                      c.divisor ? c.divisor : 1);
  expect_runs_on_the_host(Arch::sm90, text, "pool_" + c.name);
}

TEST(RowwiseGeneratedNvcc, PoolsRunOnTheHostAsPyTorchDefinesThem) {
  // 2x2 max over odd rows (runs cross rows), a padded 3x3 average with and without the padding in its divisor, a 4x4
  // average by divisor_override, 2x2 averages padded along rows only, a dilated max with padding, a 3-D max, ceil_mode
  // and 1-D overlapping windows.
  expect_pool_runs_as_pytorch_on_the_host({"max2", "aten.max_pool2d.default", {10, 14}, {5, 7}, {2, 2}, {2, 2}, {0, 0}, {1, 1}});
  expect_pool_runs_as_pytorch_on_the_host(
      {"avg3_pad", "aten.avg_pool2d.default", {7, 17}, {4, 9}, {3, 3}, {2, 2}, {1, 1}, {}, false});
  expect_pool_runs_as_pytorch_on_the_host(
      {"avg3_pad_incl", "aten.avg_pool2d.default", {7, 17}, {4, 9}, {3, 3}, {2, 2}, {1, 1}, {}, true});
  expect_pool_runs_as_pytorch_on_the_host(
      {"avg4_div", "aten.avg_pool2d.default", {16, 32}, {4, 8}, {4, 4}, {4, 4}, {0, 0}, {}, true, 7});
  // Rows padded, columns not (runs along them): both divisors.
  expect_pool_runs_as_pytorch_on_the_host(
      {"avg2_padh", "aten.avg_pool2d.default", {9, 16}, {5, 8}, {2, 2}, {2, 2}, {1, 0}, {}, false});
  expect_pool_runs_as_pytorch_on_the_host(
      {"avg2_padh_incl", "aten.avg_pool2d.default", {9, 16}, {5, 8}, {2, 2}, {2, 2}, {1, 0}, {}, true});
  expect_pool_runs_as_pytorch_on_the_host(
      {"max3_dil", "aten.max_pool2d.default", {11, 13}, {5, 6}, {3, 3}, {2, 2}, {1, 1}, {2, 2}});
  // ceil_mode (the output's shape says so): the last windows hang past the input.
  expect_pool_runs_as_pytorch_on_the_host({"max3_ceil", "aten.max_pool2d.default", {10, 12}, {5, 6}, {3, 3}, {2, 2}, {0, 0}, {1, 1}});
  expect_pool_runs_as_pytorch_on_the_host(
      {"avg3_ceil_pad", "aten.avg_pool2d.default", {10, 11}, {6, 6}, {3, 3}, {2, 2}, {1, 1}, {}, true});
  // Overlapping stride-1 windows (KernelBench level1/41's, 42's and 44's shapes of pool, small): a run spans the V
  // windows' union; and windows with gaps between them (stride over the window), element by element.
  expect_pool_runs_as_pytorch_on_the_host({"max4_s1", "aten.max_pool2d.default", {9, 13}, {8, 12}, {4, 4}, {1, 1}, {1, 1}, {1, 1}});
  expect_pool_runs_as_pytorch_on_the_host({"max2_s3", "aten.max_pool2d.default", {10, 14}, {3, 5}, {2, 2}, {3, 3}, {0, 0}, {1, 1}});
  expect_pool_runs_as_pytorch_on_the_host({"max1d_dil", "aten.max_pool1d.default", {50}, {37}, {8}, {1}, {4}, {3}});
  expect_pool_runs_as_pytorch_on_the_host({"avg1d", "aten.avg_pool1d.default", {50}, {51}, {8}, {1}, {4}, {}, true});
  expect_pool_runs_as_pytorch_on_the_host(
      {"max3d", "aten.max_pool3d.default", {4, 6, 8}, {2, 3, 4}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}});
}

TEST(RowwiseGeneratedNvcc, PointwiseChainAndSoftmaxOnePassAndTwoPassCompileForSm90) {
  GraphDoc one;
  one.input("x", {4, 8}, "bfloat16").op("r", "aten.relu.default", {ref_to("x")}, {4, 8}, "bfloat16").output("r");
  expect_generated_compiles(one, false, "rowwise_relu_bf16");
  expect_generated_compiles(pointwise_chain(), false, "rowwise_flat");
  expect_generated_compiles(softmax_after_pointwise(1000), true, "rowwise_softmax_one_pass");
  expect_generated_compiles(softmax_after_pointwise(1000), false, "rowwise_softmax_two_pass");
  expect_generated_compiles(softmax_rows(32768, 65535), true, "rowwise_softmax_cluster4_one_pass", 4);
  expect_generated_compiles(softmax_rows(16, 1 << 20), false, "rowwise_softmax_cluster4_two_pass", 4);
  expect_generated_compiles(softmax_rows(4096, 393216), true, "rowwise_softmax_cluster8_smem_one_pass", 8);
  expect_generated_compiles(rms_over_channels(4, 64, 1000), true, "rowwise_rms_strided_one_pass");
  expect_generated_compiles(rms_over_channels(4, 64, 1000), false, "rowwise_rms_strided_two_pass");
  GraphDoc lse;  // logsumexp over channels, then relu: one value per strided row (KernelBench level2/43's tail)
  lse.input("x", {4, 64, 16, 64, 64});
  lse.op("l", "aten.logsumexp.default", {ref_to("x"), Json::array({1}), true}, {4, 1, 16, 64, 64});
  lse.op("r", "aten.relu.default", {ref_to("l")}, {4, 1, 16, 64, 64}).output("r");
  expect_generated_compiles(lse, false, "rowwise_lse_strided_two_pass");
  expect_generated_compiles(lse, true, "rowwise_lse_strided_one_pass");
  expect_generated_compiles(bias_over_channels(), false, "rowwise_flat_channel_bias");
  GraphDoc sb;  // softmax over channels, then a per-channel bias (KernelBench level2/91's tail)
  sb.input("x", {2, 64, 8, 8}).input("b", {64, 1, 1});
  sb.op("s", "aten.softmax.int", {ref_to("x"), 1}, {2, 64, 8, 8});
  sb.op("a", "aten.add.Tensor", {ref_to("s"), ref_to("b")}, {2, 64, 8, 8}).output("a");
  expect_generated_compiles(kl_div_terms(), true, "rowwise_kl_div_partials_one_pass");
  expect_generated_compiles(group_norm_hardtanh({16, 64}, 8), true, "rowwise_group_norm_one_pass");
  expect_generated_compiles(group_norm_hardtanh({1024, 8192}, 512), true, "rowwise_group_norm_4_lanes_per_row", 1, 4);
  expect_generated_compiles(group_norm_hardtanh({1024, 8192}, 512), false, "rowwise_group_norm_2_lanes_two_pass", 1, 2);
  expect_generated_compiles(group_norm_hardtanh({2, 8, 64, 64}, 4), false, "rowwise_group_norm_4d_two_pass");
  expect_generated_compiles(group_norm_hardtanh({2, 8, 16, 16}, 4), true, "rowwise_group_norm_4d_one_pass");
  expect_generated_compiles(group_norm_hardtanh({2, 64, 512, 512}, 8), false, "rowwise_group_norm_cluster4_two_pass", 4);
  expect_generated_compiles(max_pool_mish({4, 16, 126, 126}), false, "rowwise_max_pool_mish");
  expect_generated_compiles(avg_pool3d_softmax(), true, "rowwise_avg_pool3d_softmax_strided");
  expect_generated_compiles(sb, true, "rowwise_softmax_strided_bias_one_pass");
  expect_generated_compiles(mean_then_channel_bias(), true, "rowwise_mean_then_channel_bias_one_pass");
  expect_generated_compiles(mean_then_channel_bias(), false, "rowwise_mean_then_channel_bias_two_pass");
  expect_generated_compiles(sb, false, "rowwise_softmax_strided_bias_two_pass");
  // Scans: the ranked first config, and the widest tile (1024 threads, 8 accesses each: 256 warp totals).
  for (auto [op, form] : {std::pair{"aten.cumsum.default", "sum"}, std::pair{"aten.cumprod.default", "prod"}}) {
    auto prog = program_of(scan_chain(op, {64, 1000}, 1));
    auto cs = configs_of(prog);
    auto wide = std::find_if(cs.begin(), cs.end(), [](const auto& c) { return c.threads == 1024 && c.items == 8; });
    ASSERT_NE(wide, cs.end());
    for (const auto& c : {cs.at(0), *wide}) {
      const std::string name = fmt::format("rowwise_scan_{}_{}x{}", form, c.threads, c.items);
      expect_kernel_compiles(Arch::sm90, realize::render_rowwise_kernel(prog, c, "rowwise_test_" + name, c.text()), name,
                             c.text());
    }
  }
  expect_generated_compiles(batch_norm_relu({2, 64, 8, 64}), false, "rowwise_batch_norm_relu");
  expect_generated_compiles(pool_squeeze_reduce("aten.avg_pool1d.default", Json::array({Json::array({2})}),
                                                "aten.amax.default"), true, "rowwise_pool_squeeze_amax");
  auto masked = program_of(masked_scan());
  expect_kernel_compiles(Arch::sm90, realize::render_rowwise_kernel(masked, configs_of(masked).at(0), "rowwise_test_scan_masked", ""),
                         "rowwise_scan_masked", configs_of(masked).at(0).text());
  expect_generated_compiles(cross_entropy(64, 4096), true, "rowwise_cross_entropy_one_pass");
  expect_generated_compiles(swish_absmax(64, 4096), true, "rowwise_swish_absmax_kept_values");
  expect_generated_compiles(cross_entropy(64, 1 << 17), false, "rowwise_cross_entropy_two_pass");
  GraphDoc shifted;  // the target's log probability read by every element: the pick reduced over the row
  shifted.input("x", {64, 1000}).input("t", {64, 1}, "int64");
  shifted.op("l", "aten._log_softmax.default", {ref_to("x"), 1, false}, {64, 1000});
  shifted.op("g", "aten.gather.default", {ref_to("l"), 1, ref_to("t")}, {64, 1});
  shifted.op("d", "aten.sub.Tensor", {ref_to("l"), ref_to("g")}, {64, 1000}).output("d");
  expect_generated_compiles(shifted, true, "rowwise_gather_read_by_every_element");
  auto reverse = program_of(reverse_cumsum(false));
  expect_kernel_compiles(Arch::sm90, realize::render_rowwise_kernel(reverse, configs_of(reverse).at(0), "rowwise_test_scan_reverse", ""),
                         "rowwise_scan_reverse", configs_of(reverse).at(0).text());
  auto exclusive = program_of(exclusive_cumsum(64, 32768));  // a CTA per row and (second) a warp per row
  for (int i : {0, 1})
    expect_kernel_compiles(Arch::sm90, realize::render_rowwise_kernel(exclusive, configs_of(exclusive).at(i),
                                                                      fmt::format("rowwise_test_scan_exclusive{}", i), ""),
                           fmt::format("rowwise_scan_exclusive{}", i), configs_of(exclusive).at(i).text());
}

}  // namespace

// A LayerNorm the layer_norm rule matched alone, read only by pointwise ops (KernelBench level2/34's LayerNorm, GELU,
// scaling): one generated kernel normalizes and runs them (one pass over the tensor); a LayerNorm a Linear reads, or
// whose readers' region cannot take it (a pool reading it from memory), stays the rule's.
// KernelBench level2/51's tail: the residual is x.clone().detach(), first in graph order, read only by the chain's last
// op, and here the chain is cut into runs (a softmax of a per-row value). The clone and detach join the add's run: no
// run of pass-throughs alone (which computes nothing and so stays PyTorch's), every op in a generated kernel.
TEST(RowwiseGenerated, ACloneReadByTheLastRunJoinsIt) {
  GraphDoc d;
  d.input("x", {64, 256}).input("y", {64, 256});
  d.op("clone", "aten.clone.default", {ref_to("x")}, {64, 256});
  d.op("detach", "aten.detach.default", {ref_to("clone")}, {64, 256});
  d.op("mean", "aten.mean.dim", {ref_to("y"), Json::array({1}), true}, {64, 1});
  d.op("sm", "aten._softmax.default", {ref_to("mean"), 1, false}, {64, 1});
  d.op("gelu", "aten.gelu.default", {ref_to("sm")}, {64, 1});
  d.op("add", "aten.add.Tensor", {ref_to("gelu"), ref_to("detach")}, {64, 256}).output("add");
  auto p = plan_of(d);
  ASSERT_TRUE(noted(p, "cut into runs")) << fmt::format("{}", fmt::join(p.notes, "\n"));
  std::set<std::string> covered;
  std::vector<std::string> with_add;
  for (const auto& e : p.entries) {
    covered.insert(e.match.nodes.begin(), e.match.nodes.end());
    if (std::find(e.match.nodes.begin(), e.match.nodes.end(), "add") != e.match.nodes.end()) with_add = e.match.nodes;
  }
  EXPECT_EQ(with_add, (std::vector<std::string>{"clone", "detach", "add"})) << fmt::format("{}", fmt::join(p.notes, "\n"));
  for (const char* n : {"clone", "detach", "mean", "sm", "gelu", "add"}) EXPECT_TRUE(covered.count(n)) << n;
}

// KernelBench level2/18's chain after its GEMM: a row's sum, then a max, a mean and two logsumexps of that one value a
// row (over its dim of extent 1): those reduce one element each, so the chain is one kernel with one reduction.
TEST(RowwiseGenerated, AReductionOfOneValueARowIsThatValue) {
  GraphDoc d;
  d.input("y", {64, 256});
  d.op("s", "aten.sum.dim_IntList", {ref_to("y"), Json::array({1}), true}, {64, 1});
  d.op("mx", "aten.amax.default", {ref_to("s"), Json::array({1}), true}, {64, 1});
  d.op("mean", "aten.mean.dim", {ref_to("mx"), Json::array({1}), true}, {64, 1});
  d.op("l0", "aten.logsumexp.default", {ref_to("mean"), Json::array({1}), true}, {64, 1});
  d.op("l1", "aten.logsumexp.default", {ref_to("l0"), Json::array({1}), false}, {64}).output("l1");
  auto p = plan_of(d);
  const auto* e = generated(p);
  ASSERT_NE(e, nullptr) << fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_EQ(e->match.nodes, (std::vector<std::string>{"s", "mx", "mean", "l0", "l1"}));
  const auto prog = discover::lower_row_program(e->match.kernel["fragment"]);
  EXPECT_EQ(prog.reductions(), 1);
  EXPECT_EQ(prog.output, prog.statements.back().var) << "the output is the sum itself";
  // A softmax of one element is 1, not the element: still a reduction of a per-row value, refused by name.
  GraphDoc sm;
  sm.input("y", {64, 256});
  sm.op("s", "aten.sum.dim_IntList", {ref_to("y"), Json::array({1}), true}, {64, 1});
  sm.op("p", "aten._softmax.default", {ref_to("s"), 1, false}, {64, 1}).output("p");
  EXPECT_TRUE(noted(plan_of(sm), "reduces a value that is one per row")) << fmt::format("{}", fmt::join(plan_of(sm).notes, "\n"));
}

TEST(RowwiseGenerated, ALoneLayerNormJoinsThePointwiseOpsReadingIt) {
  auto layer_norm_then = [](const char* op, Json args, std::vector<int64_t> out) {
    GraphDoc d;
    d.input("x", {4, 8, 6, 64}).input("w", {64}, "float32", "parameter").input("b", {64}, "float32", "parameter");
    d.op("ln", "aten.layer_norm.default", {ref_to("x"), {64}, ref_to("w"), ref_to("b"), 1e-5, false}, {4, 8, 6, 64});
    args.insert(args.begin(), ref_to("ln"));
    d.op("y", op, args, out);
    d.op("z", "aten.mul.Tensor", {ref_to("y"), 2.0}, out).output("z");
    return d;
  };
  auto ln_rule = [](const discover::Plan& p) {
    return std::count_if(p.entries.begin(), p.entries.end(), [](const auto& e) { return e.match.rule == "layer_norm"; });
  };
  auto p = plan_of(layer_norm_then("aten.gelu.default", Json::array(), {4, 8, 6, 64}));
  ASSERT_NE(generated(p), nullptr);
  EXPECT_EQ(generated(p)->match.nodes, (std::vector<std::string>{"ln", "y", "z"}));
  EXPECT_EQ(ln_rule(p), 0);
  EXPECT_TRUE(noted(p, "joins the generated row-wise kernel")) << fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_TRUE(discover::lower_row_program(generated(p)->match.kernel["fragment"]).reductions() > 0);

  auto pooled = plan_of(layer_norm_then("aten.avg_pool2d.default", Json::array({Json::array({2, 2})}), {4, 8, 3, 32}));
  EXPECT_EQ(ln_rule(pooled), 1) << "a pool reads the normalized tensor from memory: the rule keeps it";
  ASSERT_NE(generated(pooled), nullptr);
  EXPECT_EQ(generated(pooled)->match.nodes, (std::vector<std::string>{"y", "z"}));

  GraphDoc linear;
  linear.input("x", {32, 64}).input("w", {64}, "float32", "parameter").input("b", {64}, "float32", "parameter");
  linear.input("m", {16, 64}, "float32", "parameter");
  linear.op("ln", "aten.layer_norm.default", {ref_to("x"), {64}, ref_to("w"), ref_to("b"), 1e-5, false}, {32, 64});
  linear.op("y", "aten.linear.default", {ref_to("ln"), ref_to("m")}, {32, 16}).output("y");
  EXPECT_EQ(ln_rule(plan_of(linear)), 1) << "a Linear reads it: no region to join";
}
