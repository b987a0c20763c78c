// The conv family (issue 17): conv1d/2d/3d matches (forward, transposed, grouped) with their grown epilogues
// (per-channel [K, 1, 1] vectors are row broadcasts), the problem's checks (TMA's channel alignment, groups, output
// extents), the config spaces (implicit GEMM, direct), the kernels and op wrapper rendered from their templates, the
// composed call, and (tests named *Nvcc*) nvcc compiles for sm_90a.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/arch_spec.h"
#include "core/error.h"
#include "discover/channels_last_chain.h"
#include "discover/pattern_registry.h"
#include "discover/plan.h"
#include "family_nvcc_check.h"
#include "ir_test_graphs.h"
#include "realize/families/conv/family.h"
#include "realize/kernel_family.h"

using namespace fact;
using namespace fact::realize;
using fact::discover::Match;
using fact::discover::Plan;
using fact::test::GraphDoc;
using fact::test::Json;
using fact::test::ref_to;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

Plan plan_of(GraphDoc& d, Numerics numerics = Numerics::x3tf32) {
  static const auto registry = discover::PatternRegistry::builtin();
  return discover::make_plan(d.graph(), registry, ir::OpTable::builtin(), ArchSpec::builtin("sm90"), numerics);
}

// KernelBench's Conv2d_ReLU_BiasAdd shape, small: x [4, 16, 18, 18], w [32, 16, 3, 3] + b [32], stride 1, padding 0
// -> [4, 32, 16, 16]; then relu and + a [32, 1, 1] parameter (a per-channel vector).
GraphDoc conv_relu_bias(const std::string& dtype = "float32", int64_t c = 16) {
  GraphDoc d;
  d.input("w", {32, c, 3, 3}, dtype, "parameter").input("b", {32}, dtype, "parameter");
  d.input("bias2", {32, 1, 1}, dtype, "parameter").input("x", {4, c, 18, 18}, dtype);
  d.op("conv2d", "aten.conv2d.default", {ref_to("x"), ref_to("w"), ref_to("b")}, {4, 32, 16, 16}, dtype);
  d.op("relu", "aten.relu.default", {ref_to("conv2d")}, {4, 32, 16, 16}, dtype);
  d.op("add", "aten.add.Tensor", {ref_to("relu"), ref_to("bias2")}, {4, 32, 16, 16}, dtype);
  d.output("add");
  return d;
}

// ResNet's stem, small: x [2, 3, 32, 32], w [64, 3, 7, 7], stride 2, padding 3 -> [2, 64, 16, 16], then ReLU.
GraphDoc resnet_stem() {
  GraphDoc d;
  d.input("w", {64, 3, 7, 7}, "float32", "parameter").input("x", {2, 3, 32, 32});
  d.op("conv2d", "aten.conv2d.default", {ref_to("x"), ref_to("w"), nullptr, Json::array({2, 2}), Json::array({3, 3}),
                                         Json::array({1, 1}), 1}, {2, 64, 16, 16});
  d.op("relu", "aten.relu.default", {ref_to("conv2d")}, {2, 64, 16, 16});
  d.output("relu");
  return d;
}

const Match& conv_match(const Plan& p) {
  for (const auto& e : p.entries)
    if (e.match.family == "conv") return e.match;
  throw Error("no conv entry in the plan");
}

ConvProblem problem_of(GraphDoc& d) {
  Plan p = plan_of(d);
  return conv_problem_from_match(conv_match(p), p.graph, Numerics::tf32, Arch::sm90);
}

// The composed module's call of the match's op (operands bound as the composer binds them).
std::string composed_call(const Plan& p, const Match& m, const ConvProblem& cp, const ConvConfig& c) {
  Json problem = cp.to_json(), config = c.to_json();
  OpCallSite site{m, p.graph, problem, config, "torch.ops.fact." + c.id(), m.anchor,
                  "pattern conv at node '" + m.anchor + "'",
                  [&](const char* operand, bool required) -> std::string {
                    const Json ops = m.kernel.value("operands", Json::object());
                    const ir::Node* n = bound_node(m, p.graph, ops.value(operand, Json()));
                    if (!n && required) throw Error(std::string("unbound ") + operand);
                    return n ? n->name : "None";
                  },
                  [&](const char* operand) {
                    return bound_node(m, p.graph, m.kernel.value("operands", Json::object()).value(operand, Json()));
                  }};
  return kernel_family_named("conv")->op_call(site).expression;
}

}  // namespace

TEST(ConvFamily, MatchGrowsOverPointwiseOpsWithPerChannelVectors) {
  GraphDoc d = conv_relu_bias();
  Plan p = plan_of(d);
  const Match& m = conv_match(p);
  EXPECT_EQ(m.anchor, "add");
  EXPECT_EQ(m.nodes, (std::vector<std::string>{"conv2d", "relu", "add"}));
  EXPECT_EQ(m.kernel["epilogue_tree"],
            Json::parse(R"(["add", ["relu", ["add", ["mul", "alpha", "acc"], {"row": "bias"}]], {"row": "vec0"}])"));
  ConvProblem cp = conv_problem_from_match(m, p.graph, Numerics::tf32, Arch::sm90);
  EXPECT_EQ(cp.spatial_dims, 2);
  EXPECT_EQ(cp.n, 4);
  EXPECT_EQ(cp.c, 16);
  EXPECT_EQ(cp.k, 32);
  EXPECT_EQ(cp.out, (ConvDims{1, 16, 16}));
  EXPECT_EQ(cp.numerics(), Numerics::tf32) << "fp32 convolutions multiply in TF32, as cuDNN's default";
  EXPECT_EQ(cp.gemm_m(), 4 * 16 * 16);
  EXPECT_EQ(cp.gemm_k(), 16 * 9);
  EXPECT_EQ(ConvProblem::from_json(cp.to_json()).to_json(), cp.to_json());
}

TEST(ConvFamily, AttrsStrideDilationPaddingAndOneDimConvs) {
  GraphDoc d;
  d.input("w", {64, 32, 5}, "float32", "parameter").input("x", {2, 32, 100});
  // conv1d(x, w, None, stride [2], padding [3], dilation [2]): (100 + 6 - 8 - 1) // 2 + 1 = 49.
  d.op("conv1d", "aten.conv1d.default", {ref_to("x"), ref_to("w"), nullptr, Json::array({2}), Json::array({3}),
                                         Json::array({2})}, {2, 64, 49});
  d.output("conv1d");
  ConvProblem p = problem_of(d);
  EXPECT_EQ(p.spatial_dims, 1);
  EXPECT_EQ(p.in, (ConvDims{1, 1, 100}));
  EXPECT_EQ(p.stride, (ConvDims{1, 1, 2}));
  EXPECT_EQ(p.padding, (ConvDims{0, 0, 3}));
  EXPECT_EQ(p.dilation, (ConvDims{1, 1, 2}));
  EXPECT_EQ(p.out, (ConvDims{1, 1, 49}));
  EXPECT_EQ(p.epilogue.tree.text(), "mul(alpha,acc)") << "no bias: alpha * acc";
}

// TMA loads whole 16-byte vectors of channels: a 3-channel image is padded to 4 (x's channels-last copy and the
// filter, with zeros), while the filter's output channels must be whole vectors already.
TEST(ConvFamily, ImageChannelsArePaddedAndUnalignedOutputChannelsStayPyTorchs) {
  GraphDoc rgb = conv_relu_bias("float32", 3);
  ConvProblem rp = problem_of(rgb);
  ASSERT_TRUE(rp.dense_direct) << "3 into 32 channels: the direct kernel's (DenseConvsOfFewChannelsRunTheDirectKernel)";
  rp.dense_direct = false;  // the implicit GEMM's, as in a chain of convolutions or with more output channels
  EXPECT_EQ(rp.c, 3);
  EXPECT_EQ(rp.padded_c(), 4);
  EXPECT_EQ(rp.gemm_k(), 4 * 9) << "the K loop runs over the padded channels";
  // The unfolded kernel (a 3-channel image's configs fold their width taps first: SmallChannelConvsFoldTheirWidthTaps).
  ConvConfig rc;
  for (const auto& k : enumerate_conv_configs(rp, 1000).ranked)
    if (!k.fold_width) { rc = k; break; }
  ASSERT_FALSE(rc.fold_width);
  ASSERT_EQ(rc.tile_k, 8) << rc.summary();
  std::string kernel = generate_conv_kernel(rc).text;
  EXPECT_TRUE(has(kernel, "constexpr bool kFoldWidth = false;"));
  EXPECT_TRUE(has(kernel, "transpose<kX3tf32>(a.x, base + w.x, a.n, a.c, in_pixels, padded_channels(a), stream)"));
  EXPECT_TRUE(has(kernel, "(x_in_place(a) && a.c != padded_channels(a))")) << "a channels-last x is read in place only unpadded";
  const KernelFamily* family = kernel_family_named("conv");
  ASSERT_NE(family, nullptr);
  EXPECT_EQ(family->channels_last(rp.to_json(), rc.to_json()).reads, std::vector<std::string>{"residual"})
      << "so the composer never hands it a channels-last 3-channel x";
  EXPECT_TRUE(has(kernel, "r < rows ? src[r * cols + c] : Element(0)")) << "the padded channels are zero";
  std::string op = generate_conv_op_wrapper(rc).text;
  EXPECT_TRUE(has(op, "at::constant_pad_nd(wl, {0, vector - a.c % vector})")) << "and so are the filter's";
  GraphDoc odd;
  odd.input("w", {30, 16, 3, 3}, "float32", "parameter").input("x", {4, 16, 18, 18});
  odd.op("conv2d", "aten.conv2d.default", {ref_to("x"), ref_to("w")}, {4, 30, 16, 16});
  odd.output("conv2d");
  try {
    problem_of(odd);
    FAIL() << "k = 30 is not a multiple of 4 fp32 channels";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "multiple of 4 output channels")) << e.what();
  }
}

// MobileNet's depthwise block, small: x [2, 24, 17, 17], w [48, 1, 3, 3] (groups 24, two outputs a channel), stride
// 2, padding 1 -> [2, 48, 9, 9]; then BatchNorm in eval written out (* a [48, 1, 1] scale, + a shift) and ReLU6
// (hardtanh 0..6).
GraphDoc depthwise_bn_relu6(int64_t groups = 24, int64_t c = 24) {
  GraphDoc d;
  const std::vector<int64_t> out = {2, 48, 9, 9};
  d.input("w", {48, c / groups, 3, 3}, "float32", "parameter").input("x", {2, c, 17, 17});
  d.input("scale", {48, 1, 1}, "float32", "parameter").input("shift", {48, 1, 1}, "float32", "parameter");
  d.op("conv2d", "aten.conv2d.default", {ref_to("x"), ref_to("w"), nullptr, Json::array({2, 2}), Json::array({1, 1}),
                                         Json::array({1, 1}), groups}, out);
  d.op("mul", "aten.mul.Tensor", {ref_to("conv2d"), ref_to("scale")}, out);
  d.op("add", "aten.add.Tensor", {ref_to("mul"), ref_to("shift")}, out);
  d.op("relu6", "aten.hardtanh.default", {ref_to("add"), 0.0, 6.0}, out);
  d.output("relu6");
  return d;
}

// BatchNorm2d in eval after a convolution (its [C] statistics run along the output's channels, dim 1): four
// per-channel vectors of the conv's epilogue, with the ReLU after it.
TEST(ConvFamily, BatchNormInEvalJoinsTheEpilogueAsChannelVectors) {
  GraphDoc d;
  d.input("w", {32, 16, 3, 3}, "float32", "parameter").input("x", {4, 16, 18, 18});
  for (const char* v : {"bn_w", "bn_b", "bn_rm", "bn_rv"}) d.input(v, {32}, "float32", "buffer");
  d.op("conv2d", "aten.conv2d.default", {ref_to("x"), ref_to("w")}, {4, 32, 16, 16});
  d.op("bn", "aten.batch_norm.default", {ref_to("conv2d"), ref_to("bn_w"), ref_to("bn_b"), ref_to("bn_rm"),
                                         ref_to("bn_rv"), false, 0.1, 1e-05, false}, {4, 32, 16, 16});
  d.op("relu", "aten.relu.default", {ref_to("bn")}, {4, 32, 16, 16});
  d.output("relu");
  Plan plan = plan_of(d);
  const Match& m = conv_match(plan);
  EXPECT_EQ(m.anchor, "relu");
  ConvProblem p = conv_problem_from_match(m, plan.graph, Numerics::tf32, Arch::sm90);
  EXPECT_EQ(p.epilogue.tree.text(),
            "relu(add(mul(mul(sub(mul(alpha,acc),row(vec0)),rsqrt(add(row(vec1),1e-05))),row(vec2)),row(vec3)))");
  EXPECT_EQ(m.inputs.at("$vec0"), "bn_rm");
  EXPECT_EQ(m.inputs.at("$vec3"), "bn_b");
}

// Grouped and depthwise convolutions are the direct kernel's: fp32 FMAs over the group's planes staged in shared
// memory, specialized on the filter, stride and dilation, the grown epilogue computed per element, w read as
// PyTorch holds it; implicit-GEMM configs refuse them and direct configs refuse groups 1.
TEST(ConvFamily, GroupedAndDepthwiseConvolutionsRunTheDirectKernel) {
  GraphDoc d = depthwise_bn_relu6();
  Plan plan = plan_of(d);
  const Match& m = conv_match(plan);
  EXPECT_EQ(m.anchor, "relu6") << "the epilogue grows over the written-out BatchNorm and ReLU6";
  ConvProblem p = conv_problem_from_match(m, plan.graph, Numerics::tf32, Arch::sm90);
  EXPECT_EQ(p.groups, 24);
  EXPECT_EQ(p.c, 24);
  EXPECT_EQ(p.k, 48);
  EXPECT_TRUE(p.direct());
  EXPECT_EQ(p.numerics(), Numerics::fp32) << "no tensor cores: fp32 FMAs";
  EXPECT_EQ(p.gemm_k(), 9) << "one input channel a group times the taps";
  EXPECT_EQ(ConvProblem::from_json(p.to_json()).to_json(), p.to_json());
  auto space = enumerate_conv_configs(p, 100);
  ASSERT_FALSE(space.ranked.empty());
  for (const ConvConfig& c : space.ranked) {
    EXPECT_TRUE(c.direct) << c.summary();
    EXPECT_EQ(c.filter, (ConvDims{1, 3, 3}));
    EXPECT_EQ(c.stride, (ConvDims{1, 2, 2}));
    EXPECT_LT(c.tile_w, 2 * 9 + 32) << "no tile over twice the 9 output columns but the narrowest";
  }
  ConvConfig c = space.ranked.at(0);
  EXPECT_EQ(ConvConfig::from_json(c.to_json()).id(), c.id());
  EXPECT_TRUE(has(c.summary(), "direct")) << c.summary();
  ConvConfig gemm;
  gemm.spatial_dims = 2;
  gemm.epilogue = p.epilogue;
  EXPECT_TRUE(has(conv_config_rejection(p, gemm), "direct kernel")) << conv_config_rejection(p, gemm);
  GraphDoc dense = conv_relu_bias();
  ConvProblem dp = problem_of(dense);
  ConvConfig direct = c;
  direct.epilogue = dp.epilogue;
  EXPECT_TRUE(has(conv_config_rejection(dp, direct), "groups 1")) << conv_config_rejection(dp, direct);

  std::string kernel = generate_conv_kernel(c).text;
  EXPECT_TRUE(has(kernel, "constexpr int kFilterD = 1, kFilterH = 3, kFilterW = 3;"));
  EXPECT_TRUE(has(kernel, "constexpr int kStrideD = 1, kStrideH = 2, kStrideW = 2;"));
  EXPECT_TRUE(has(kernel, "const float vec0 = load(static_cast<const Element*>(a.vectors[0]), channel);"));
  EXPECT_TRUE(has(kernel, "Scalar{}((((alpha * acc) * vec0) + vec1))")) << "the tree per element";
  EXPECT_TRUE(has(kernel, "struct FactAct_hardtanh_")) << "ReLU6 from the table's expr";
  EXPECT_FALSE(has(kernel, "{{")) << "every slot filled";
  std::string op = generate_conv_op_wrapper(c).text;
  EXPECT_TRUE(has(op, "const bool implicit = !true, as_is = transposed || !implicit, any_layout = false;"))
      << "w read as PyTorch holds it, x and out channels-first";
  EXPECT_TRUE(has(kernel, "constexpr bool kChannelsLast = false;"));
  const KernelFamily* family = kernel_family_named("conv");
  ASSERT_NE(family, nullptr);
  EXPECT_FALSE(family->channels_last(p.to_json(), c.to_json()).writes) << "channel planes in and out";
  EXPECT_TRUE(has(op, "a.groups = groups;"));
  EXPECT_EQ(composed_call(plan, m, p, c),
            "torch.ops.fact." + c.id() + "(x, w, None, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 24, "
            "[scale.reshape(-1), shift.reshape(-1)], w_constant=True)");

  // Grouped (4 groups of 6 input channels) is the same kernel; groups of more channels than it stages stay PyTorch's.
  GraphDoc grouped = depthwise_bn_relu6(4);
  ConvProblem gp = problem_of(grouped);
  EXPECT_EQ(gp.gemm_k(), 6 * 9);
  EXPECT_TRUE(enumerate_conv_configs(gp, 1).ranked.at(0).direct);
  GraphDoc wide;
  wide.input("w", {64, 32, 3, 3}, "float32", "parameter").input("x", {2, 64, 18, 18});
  wide.op("conv2d", "aten.conv2d.default", {ref_to("x"), ref_to("w"), nullptr, Json::array({1, 1}),
                                            Json::array({0, 0}), Json::array({1, 1}), 2}, {2, 64, 16, 16});
  wide.output("conv2d");
  try {
    enumerate_conv_configs(problem_of(wide), 1);
    FAIL() << "32 input channels a group";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "reads each output's group channel by channel")) << e.what();
  }
}

// An image's 3 channels into 32: the direct kernel, each CTA computing a block of output channels from every staged
// plane; ResNet's stem (64 outputs), a chain's conv and a 3xTF32 one stay the implicit GEMM's.
TEST(ConvFamily, DenseConvsOfFewChannelsRunTheDirectKernel) {
  GraphDoc rgb = conv_relu_bias("float32", 3);
  Plan plan = plan_of(rgb);
  const Match& m = conv_match(plan);
  ConvProblem p = conv_problem_from_match(m, plan.graph, Numerics::tf32, Arch::sm90);
  EXPECT_TRUE(p.dense_direct);
  EXPECT_TRUE(p.direct());
  EXPECT_EQ(p.numerics(), Numerics::fp32) << "fp32 FMAs, as a grouped convolution's";
  EXPECT_EQ(p.gemm_k(), 3 * 9) << "no padded channels";
  EXPECT_EQ(p.to_json().at("direct"), true);
  EXPECT_EQ(ConvProblem::from_json(p.to_json()).to_json(), p.to_json());
  auto space = enumerate_conv_configs(p, 100);
  ASSERT_GE(space.ranked.size(), 3u);
  for (const ConvConfig& c : space.ranked) EXPECT_TRUE(c.direct) << c.summary();
  ASSERT_GE(space.ranked.size(), 5u);
  const int widest_first[] = {16, 8, 4, 2, 1};
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(space.ranked[i].channel_block, widest_first[i]) << "the widest block first, each block's best in turn";
  ConvConfig c = space.ranked[2];
  EXPECT_EQ(ConvConfig::from_json(c.to_json()).id(), c.id());
  EXPECT_TRUE(has(c.summary(), "x4 channels")) << c.summary();
  std::string kernel = generate_conv_kernel(c).text;
  EXPECT_TRUE(has(kernel, "constexpr int kChannelBlock = 4;"));
  EXPECT_TRUE(has(kernel, "constexpr bool kTapsByRow = false;")) << "4 x 9 taps fit in registers";
  EXPECT_TRUE(has(kernel, "const int channel = channel0 + o;")) << "the epilogue's vectors per channel of the block";
  EXPECT_FALSE(has(kernel, "{{")) << "every slot filled";
  EXPECT_TRUE(has(generate_conv_kernel(space.ranked[0]).text, "constexpr bool kTapsByRow = true;"))
      << "16 channels hold a filter row's taps at a time";
  ConvConfig odd = c;
  odd.channel_block = 3;
  EXPECT_TRUE(has(conv_config_rejection(p, odd), "must divide the 32")) << conv_config_rejection(p, odd);
  ConvConfig wide = space.ranked[0];
  wide.rows_per_warp = 8;  // 16 channels x 8 rows
  EXPECT_TRUE(has(conv_config_rejection(p, wide), "accumulators a thread")) << conv_config_rejection(p, wide);
  ConvConfig one = space.ranked[4];
  EXPECT_EQ(one.to_json().count("channel_block"), 0u) << "one-channel configs keep the ids they had";

  const KernelFamily* family = kernel_family_named("conv");
  ASSERT_NE(family, nullptr);
  Json chained = family->in_channels_last_chain(p.to_json());
  EXPECT_EQ(chained.count("direct"), 0u) << "a chain's conv: the implicit GEMM, channels-last";
  EXPECT_EQ(chained.at("numerics"), "tf32");
  EXPECT_FALSE(conv_problem_from_match(m, plan.graph, Numerics::x3tf32, Arch::sm90).dense_direct)
      << "3xTF32 is measured against cuDNN with TF32 off: its own kernels";
  GraphDoc stem = resnet_stem();
  EXPECT_FALSE(problem_of(stem).dense_direct) << "64 output channels: past direct_dense_max_outputs";
  ConvProblem bad = p;
  bad.channels_last = true;
  EXPECT_THROW(bad.validate(), Error);
}

TEST(ConvFamily, ConfigSpaceKeepsAccumulatorsInRegistersAndRanksClusters) {
  GraphDoc d = conv_relu_bias();
  ConvProblem p = problem_of(d);
  auto space = enumerate_conv_configs(p, 6);
  ASSERT_EQ(space.ranked.size(), 6u);
  bool single = false, cluster = false;
  for (const auto& c : space.ranked) {
    EXPECT_EQ(conv_config_rejection(p, c), "") << c.summary();
    EXPECT_EQ(c.tile_k, 16) << "16 fp32 channels: 64-byte K tiles, no zeros loaded";
    single |= c.cluster_m * c.cluster_n == 1;
    cluster |= c.cluster_m * c.cluster_n > 1;
    EXPECT_EQ(ConvConfig::from_json(c.to_json()).id(), c.id());
  }
  EXPECT_TRUE(single && cluster) << "single CTAs and clusters take turns in the ranking";
  ConvConfig big = space.ranked.front();
  big.tile_m = 256;
  big.tile_n = 128;
  EXPECT_TRUE(has(conv_config_rejection(p, big), "accumulators"));
}

// A conv's K loop is short (c * taps), so the ranking prefers two CTAs a SM, whose epilogues overlap each other's MMAs;
// two CTAs share the registers (the producer hands its own to the consumer warpgroup), so only tiles of at most 128
// accumulators a thread qualify, and the kernel asks nvcc for it through the launch bounds with half the shared
// memory for its stages.
TEST(ConvFamily, TwoCtasASmForShortKLoopsWithHalfTheRegisters) {
  GraphDoc d = conv_relu_bias();  // K = 16 * 9 = 144: 5 K tiles
  ConvProblem p = problem_of(d);
  auto space = enumerate_conv_configs(p, 100);
  ASSERT_FALSE(space.ranked.empty());
  EXPECT_EQ(space.ranked.front().ctas_per_sm, 2) << space.ranked.front().summary();
  bool one = false;
  for (const auto& c : space.ranked) {
    one |= c.ctas_per_sm == 1;
    if (c.ctas_per_sm == 2) EXPECT_LE(c.tile_m * c.tile_n / 128, 128) << c.summary();
  }
  EXPECT_TRUE(one) << "one CTA a SM stays in the space";
  ConvConfig two = space.ranked.front();
  p.k = 256;  // output channels enough for a 256-wide tile
  two.tile_m = 128;
  two.tile_n = 256;
  two.consumer_warpgroups = 1;
  EXPECT_TRUE(has(conv_config_rejection(p, two), "over 128 with 2 CTA(s) a SM")) << conv_config_rejection(p, two);
  std::string kernel = generate_conv_kernel(space.ranked.front()).text;
  EXPECT_TRUE(has(kernel, "constexpr int kCtasPerSm = 2;"));
  EXPECT_TRUE(has(kernel, "constexpr int kCtaSmem = 114688;")) << "112 KB a CTA, from conv.json's limits";
  EXPECT_EQ(conv_cta_smem_bytes(space.ranked.front()), 114688);
  EXPECT_TRUE(has(kernel, "using ConvKernel = fact_conv::PersistentConv<UniversalKernel, kCtasPerSm, kSplits, kPingPong, kGroup>;"));
  EXPECT_TRUE(has(kernel, "constexpr bool kPingPong = false;"));
  EXPECT_TRUE(has(kernel, "static constexpr uint32_t MinBlocksPerMultiprocessor = CtasPerSm;"))
      << "the launch bounds that keep nvcc to 128 registers with 2";
  ConvConfig old = ConvConfig::from_json([&] { auto j = space.ranked.front().to_json(); j.erase("ctas_per_sm"); return j; }());
  EXPECT_EQ(old.ctas_per_sm, 1) << "configs recorded before the knob ran one CTA a SM";
}

// Two consumer warpgroups split a tile of 128 or 256 rows (64 rows each per wgmma); their accumulators count per
// warpgroup, so 128x256 fits (128 a thread) where one warpgroup could not hold it. Two such CTAs a SM (16 consumer
// warps for an epilogue's math) get 96 registers a thread, of which at most 32 accumulators, and take the ranking's
// second turn.
TEST(ConvFamily, TwoConsumerWarpgroupsShareTallTiles) {
  GraphDoc d = conv_relu_bias();
  ConvProblem p = problem_of(d);
  auto space = enumerate_conv_configs(p, 1000);
  bool cooperative = false, two_ctas = false;
  for (const auto& c : space.ranked)
    if (c.consumer_warpgroups == 2 && !c.pingpong) {
      cooperative = true;
      two_ctas |= c.ctas_per_sm == 2;
      EXPECT_EQ(c.tile_m % 128, 0) << c.summary();
      if (c.ctas_per_sm == 2) EXPECT_LE(c.tile_m * c.tile_n / 256, 32) << c.summary();
      EXPECT_TRUE(has(c.summary(), " 2wg")) << c.summary();
    }
  EXPECT_TRUE(cooperative && two_ctas);
  auto top = enumerate_conv_configs(p, 2).ranked;
  ASSERT_EQ(top.size(), 2u);
  EXPECT_TRUE(top[1].consumer_warpgroups == 2 && top[1].ctas_per_sm == 2) << top[1].summary();
  ConvConfig c = space.ranked.front();
  p.k = 256;  // output channels enough for a 256-wide tile
  c.tile_m = 128;
  c.tile_n = 256;
  c.ctas_per_sm = 1;
  c.consumer_warpgroups = 1;
  c.cluster_m = c.cluster_n = 1;
  EXPECT_TRUE(has(conv_config_rejection(p, c), "256 accumulators")) << conv_config_rejection(p, c);
  c.consumer_warpgroups = 2;
  EXPECT_EQ(conv_config_rejection(p, c), "");
  std::string kernel = generate_conv_kernel(c).text;
  EXPECT_TRUE(has(kernel, "constexpr int kConsumerWarpGroups = 2;"));
  EXPECT_TRUE(has(kernel, "cutlass::epilogue::TmaWarpSpecializedCooperative"));
  EXPECT_TRUE(has(kernel, "static_assert(kConsumerRegisters == 0 || kConsumerRegisters >= 96"));
  c.tile_m = 64;
  EXPECT_TRUE(has(conv_config_rejection(p, c), "multiple of 128 rows")) << conv_config_rejection(p, c);
  c.tile_m = 128;
  c.tile_n = 128;
  c.ctas_per_sm = 2;
  EXPECT_TRUE(has(conv_config_rejection(p, c), "64 accumulators (over 32 with 2 CTA(s) a SM)")) << conv_config_rejection(p, c);
  c.tile_n = 64;
  EXPECT_EQ(conv_config_rejection(p, c), "");
  auto j = space.ranked.front().to_json();
  j.erase("consumer_warpgroups");
  EXPECT_EQ(ConvConfig::from_json(j).consumer_warpgroups, 1) << "configs recorded before the knob had one";
}

// The K loop walks each filter tap's channels in K tiles: the K tile is the widest of 128, 64 and 32 bytes that loads
// the fewest zero channels (8 fp32 channels in a 128-byte tile would be three quarters zeros).
TEST(ConvFamily, KTileFitsTheChannels) {
  GraphDoc d = conv_relu_bias();
  ConvProblem p = problem_of(d);
  for (auto [c, tile_k] : std::vector<std::pair<int64_t, int>>{{64, 32}, {32, 32}, {16, 16}, {8, 8}, {3, 8}, {24, 8}, {40, 8}, {48, 16}}) {
    p.c = c;
    auto space = enumerate_conv_configs(p, 100);
    auto unfolded = std::find_if(space.ranked.begin(), space.ranked.end(), [](const ConvConfig& k) { return !k.fold_width; });
    ASSERT_NE(unfolded, space.ranked.end());
    for (const auto& k : space.ranked)
      if (!k.fold_width) EXPECT_EQ(k.tile_k, tile_k) << "c = " << c << ": " << k.summary();
    ConvConfig wide = *unfolded;
    wide.tile_k = tile_k == 32 ? 16 : 32;
    EXPECT_TRUE(has(conv_config_rejection(p, wide), "load fewest zeros in K tiles of " + std::to_string(tile_k)))
        << conv_config_rejection(p, wide);
  }
}

// An image's few channels fill a fraction of a K step (3 fp32 channels: 16 bytes a pixel of a 32-byte K tile, 49
// steps for a 7x7 filter), so the K loop is its steps' overhead: folding the filter's width taps into channels (x
// gathered into x' [n, h, q, s * c]) makes 7 steps of 21 channels for ResNet's stem. The fold ranks first there, is
// offered only where a tap's channels fill less than the widest K tile, and unfolded configs keep their ids.
TEST(ConvFamily, SmallChannelConvsFoldTheirWidthTaps) {
  GraphDoc stem = resnet_stem();
  ConvProblem p = problem_of(stem);
  ASSERT_TRUE(p.can_fold_width());
  EXPECT_EQ(p.folded_c(), 24) << "7 taps of 3 channels, padded to 16-byte vectors";
  auto space = enumerate_conv_configs(p, 1000).ranked;
  ASSERT_FALSE(space.empty());
  const ConvConfig& top = space.front();
  EXPECT_TRUE(top.fold_width) << top.summary();
  EXPECT_EQ(top.tile_k, 32) << "one 128-byte K step a filter row: 7 steps, not 21 of 8 channels";
  EXPECT_TRUE(has(top.summary(), " fold"));
  EXPECT_EQ(top.to_json().at("fold_width"), true);
  EXPECT_EQ(ConvConfig::from_json(top.to_json()).id(), top.id());
  bool unfolded = false;
  for (const auto& k : space) {
    unfolded |= !k.fold_width;
    if (!k.fold_width) EXPECT_FALSE(k.to_json().contains("fold_width")) << "written only when set";
  }
  EXPECT_TRUE(unfolded) << "the unfolded kernels stay in the space, ranked after";
  ConvConfig narrow = top;
  narrow.tile_k = 8;
  EXPECT_TRUE(has(conv_config_rejection(p, narrow), "cheapest K loop in K tiles of 32")) << conv_config_rejection(p, narrow);

  std::string kernel = generate_conv_kernel(top).text;
  EXPECT_TRUE(has(kernel, "constexpr bool kFoldWidth = true;"));
  EXPECT_TRUE(has(kernel, "fold_width(a, p.launches.front(), base + w.x, base + w.filters, stream);"));
  EXPECT_TRUE(has(kernel, "l.filter[w] = 1;")) << "the launch is a conv of width 1 over x'";
  EXPECT_TRUE(has(kernel, "col >= 0 && col < f.in_w ? src[ci * channel_step + col * column_step] : Element(0)"))
      << "padding and the channels past the taps are zeros";
  EXPECT_TRUE(has(kernel, "w_out[fr * f.channels + j] = tap < f.taps ? src[tap * f.padded_c + ci] : Element(0);"))
      << "the filter's width taps side by side, from the ABI's unfolded filter (the op and the tuner hand that one)";
  EXPECT_TRUE(has(kernel, ": kFoldWidth || kX3tf32 ? base + w.filters")) << "the folded filter from the workspace";
  const KernelFamily* family = kernel_family_named("conv");
  ASSERT_NE(family, nullptr);
  EXPECT_EQ(family->channels_last(p.to_json(), top.to_json()).reads, std::vector<std::string>{"residual"})
      << "a fold gathers x in either order: no in-place read to keep channels-last for";

  // 8 channels of a 3x3 filter: 9 K steps of 8 channels are already under the epilogue, so the fold's gather would
  // cost more than its 3 steps save (measured 1.5-3.5% slower): the fold stays in the space, ranked after.
  GraphDoc eight = conv_relu_bias("float32", 8);
  ConvProblem ep = problem_of(eight);
  ASSERT_TRUE(ep.can_fold_width());
  auto eight_space = enumerate_conv_configs(ep, 1000).ranked;
  EXPECT_FALSE(eight_space.front().fold_width) << eight_space.front().summary();
  EXPECT_TRUE(std::any_of(eight_space.begin(), eight_space.end(), [](const ConvConfig& k) { return k.fold_width; }));

  // Channels that fill the widest K tile, a filter one tap wide or a transposed convolution: no fold.
  ConvConfig folded = top;
  ConvProblem wide = p;
  wide.c = 32;
  EXPECT_FALSE(wide.can_fold_width());
  EXPECT_TRUE(has(conv_config_rejection(wide, folded), "only for a forward conv")) << conv_config_rejection(wide, folded);
  for (const auto& k : enumerate_conv_configs(wide, 1000).ranked) EXPECT_FALSE(k.fold_width) << k.summary();
  ConvProblem one_tap = p;
  one_tap.filter = {1, 7, 1};
  EXPECT_FALSE(one_tap.can_fold_width());
  ConvProblem transposed = p;
  transposed.transposed = true;
  EXPECT_FALSE(transposed.can_fold_width());
}

// The channels-first store stages its subtiles (32 channels by 64 rows a consumer warpgroup) in CUTLASS's two D
// stages and a residual adds CUTLASS's C stages: the mainloop's stage check leaves that much to the epilogue (a
// residual epilogue of a 64x128 tile left too little once: nvcc refused the kernel with fewer than two stages).
TEST(ConvFamily, EpilogueSharedMemoryIsTheDStagesAndTheResidualsStages) {
  GraphDoc d = conv_relu_bias();
  ConvConfig c = enumerate_conv_configs(problem_of(d), 1).ranked.at(0);
  c.tile_m = 64;
  c.tile_n = 128;
  c.consumer_warpgroups = 1;
  const int64_t slack = 1024;
  EXPECT_EQ(conv_epilogue_smem_bytes(c), 2 * 64 * 32 * 4 + slack);
  c.epilogue = Epilogue::of(EpilogueTree::from_json(Json::parse(R"(["add", ["mul", "alpha", "acc"], "residual"])")));
  EXPECT_EQ(conv_epilogue_smem_bytes(c), (2 + 4) * 64 * 32 * 4 + slack) << "four subtiles of C";
  c.tile_m = 128;
  c.tile_n = 64;
  c.consumer_warpgroups = 2;
  EXPECT_EQ(conv_epilogue_smem_bytes(c), (2 + 2) * 128 * 32 * 4 + slack);
}

TEST(ConvFamily, KernelAndOpWrapperRenderTheTreeAndTheLayout) {
  GraphDoc d = conv_relu_bias();
  ConvProblem p = problem_of(d);
  ConvConfig c = enumerate_conv_configs(p, 1).ranked.at(0);
  std::string kernel = generate_conv_kernel(c).text;
  EXPECT_TRUE(has(kernel, "cutlass::layout::TensorNHWC"));
  EXPECT_TRUE(has(kernel, "cutlass::conv::Operator::kFprop"));
  EXPECT_TRUE(has(kernel, "KernelImplicitTmaWarpSpecializedSm90;"));
  EXPECT_TRUE(has(kernel, "Sm90RowBroadcast")) << "bias and the [32, 1, 1] vector are row broadcasts";
  EXPECT_TRUE(has(kernel, "a.vectors[0]"));
  EXPECT_TRUE(has(kernel, "else if (!x_in_place(a))")) << "x arrives channels-first unless the call says otherwise";
  EXPECT_TRUE(has(kernel, "store.channels_last = !kReduce && (a.channels_last & kOutLast) != 0;"));
  EXPECT_TRUE(has(kernel, "using StoreNode = fact_evt::ConvOutputStore<")) << "the tree's last node writes the output";
  EXPECT_TRUE(has(kernel, "constexpr int kReduce = 0;"));
  EXPECT_TRUE(has(kernel, "fusion::Sm90EVT<StoreNode, FusionTree>"));
  EXPECT_TRUE(has(kernel, "using EpilogueTile = cute::Shape<cute::Int<kEpilogueM>, cute::Int<kEpilogueN>>;"))
      << "the store node stages the subtile it is given";
  EXPECT_TRUE(has(kernel, "ElementC, Layout, kAlignment, void, Layout")) << "D is void: no channels-last copy of the output";
  EXPECT_FALSE(has(kernel, "transpose(out_last")) << "and no transpose after the conv";
  EXPECT_FALSE(has(kernel, "{{")) << "every slot filled";
  // A call like the last ones launches the params kept for it (no TMA descriptors encoded, no attribute set again).
  EXPECT_TRUE(has(kernel, "if (p.params.empty() || p.params_workspace != a.workspace)"));
  EXPECT_TRUE(has(kernel, "Conv::run(p.params[i], stream) != cutlass::Status::kSuccess) {"));
  EXPECT_TRUE(has(kernel, "std::memcmp(&p.key, &a, kCallKeyBytes) == 0")) << "every field up to alpha is the key";
  std::string op = generate_conv_op_wrapper(c).text;
  EXPECT_TRUE(has(op, "a.vectors[0] = held[0].data_ptr();"));
  EXPECT_TRUE(has(op, conv_op_schema(c)));
  const KernelFamily* family = kernel_family_named("conv");
  ASSERT_NE(family, nullptr);
  EXPECT_EQ(family->workload_key("conv", p.to_json()).numerics, "tf32");
}

TEST(ConvFamily, ComposedCallPassesTheModulesTensorsAndAttrs) {
  GraphDoc d = conv_relu_bias();
  Plan p = plan_of(d);
  const Match& m = conv_match(p);
  ConvProblem cp = conv_problem_from_match(m, p.graph, Numerics::tf32, Arch::sm90);
  ConvConfig c = enumerate_conv_configs(cp, 1).ranked.at(0);
  std::string call = composed_call(p, m, cp, c);
  EXPECT_EQ(call, "torch.ops.fact." + c.id() + "(x, w, b, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, "
                  "[bias2.reshape(-1)], w_constant=True)")
      << "channels-first in and out, as PyTorch's convolution; the weight, a parameter, is kept channels-last; the "
         "[32] bias as it is, the [32, 1, 1] vector flattened";
}

// KernelBench's ConvTranspose2d_BiasAdd shape, small: x [2, 16, 8, 8], w [16, 32, 3, 3] (w is [c, k, ...]) + b,
// stride 2, padding 1, output_padding 1 -> [2, 32, 16, 16]; then relu.
GraphDoc conv_transpose_relu(Json stride = Json::array({2, 2}), Json dilation = Json::array({1, 1}),
                             std::vector<int64_t> filter = {3, 3}, Json padding = Json::array({1, 1}),
                             Json output_padding = Json::array({1, 1}), std::vector<int64_t> out = {2, 32, 16, 16}) {
  GraphDoc d;
  d.input("w", {16, 32, filter[0], filter[1]}, "float32", "parameter").input("b", {32}, "float32", "parameter");
  d.input("x", {2, 16, 8, 8});
  d.op("convt", "aten.conv_transpose2d.input", {ref_to("x"), ref_to("w"), ref_to("b"), stride, padding, output_padding, 1,
                                               dilation}, out);
  d.op("relu", "aten.relu.default", {ref_to("convt")}, out);
  d.output("relu");
  return d;
}

// A global average pool (mean over the pixels) or spatial sum after the conv's epilogue: the kernel adds each image's
// sums per channel into [n, k] instead of writing the output (ConvProblem::reduce).
GraphDoc conv_relu_bias_pooled(const char* op, Json dims, bool keepdim, const std::string& dtype = "float32") {
  GraphDoc d = conv_relu_bias(dtype);
  d.json()["outputs"] = Json::array();  // the pool's value is the module's output, not the conv's
  std::vector<int64_t> shape = keepdim ? std::vector<int64_t>{4, 32, 1, 1} : std::vector<int64_t>{4, 32};
  d.op("pool", op, {ref_to("add"), dims, keepdim}, shape, dtype);
  d.output("pool");
  return d;
}

TEST(ConvFamily, AGlobalAveragePoolAfterTheConvIsSummedInItsEpilogue) {
  GraphDoc d = conv_relu_bias_pooled("aten.mean.dim", Json::array({-1, -2}), true);
  Plan p = plan_of(d);
  const Match& m = conv_match(p);
  EXPECT_EQ(m.anchor, "pool");
  EXPECT_EQ(m.nodes, (std::vector<std::string>{"conv2d", "relu", "add", "pool"}));
  EXPECT_EQ(m.kernel.value("reduce", ""), "mean");
  EXPECT_TRUE(std::any_of(p.notes.begin(), p.notes.end(), [](const std::string& n) {
    return has(n, "pool (aten.mean.dim) reduces (mean) each image's pixels in the kernel's epilogue");
  }));
  ConvProblem cp = conv_problem_from_match(m, p.graph, Numerics::tf32, Arch::sm90);
  EXPECT_EQ(cp.reduce, "mean");
  EXPECT_EQ(cp.epilogue.tree.text(), "add(relu(add(mul(alpha,acc),row(bias))),row(vec0))") << "the tree before the pool";
  EXPECT_EQ(ConvProblem::from_json(cp.to_json()).to_json(), cp.to_json());
  ConvConfig c = enumerate_conv_configs(cp, 1).ranked.at(0);
  EXPECT_EQ(c.reduce, "mean");
  EXPECT_EQ(ConvConfig::from_json(c.to_json()).id(), c.id());
  ConvConfig unreduced = c;
  unreduced.reduce = "";
  EXPECT_NE(unreduced.id(), c.id());
  EXPECT_FALSE(unreduced.to_json().contains("reduce")) << "configs writing their output keep their ids";
  EXPECT_FALSE(conv_config_rejection(cp, unreduced).empty());
  std::string kernel = generate_conv_kernel(c).text;
  EXPECT_TRUE(has(kernel, "constexpr int kReduce = 1;")) << "fact_evt::kPixels";
  EXPECT_TRUE(has(kernel, "constexpr bool kMean = true;"));
  EXPECT_TRUE(has(kernel, "constexpr int kGroup = kSplits > 1 || kReduce ? 1 :")) << "no phase groups: no stores to merge";
  EXPECT_TRUE(has(kernel, "if (kReduce == fact_evt::kPixels && cudaMemsetAsync(a.out, 0,"))
      << "the sums start at zero every call";
  EXPECT_TRUE(has(generate_conv_op_wrapper(c).text, "if (1 == 1) return {a.n, a.k};"));
  EXPECT_EQ(composed_call(p, m, cp, c), "torch.ops.fact." + c.id() + "(x, w, b, None, [1, 1], [0, 0], [1, 1], False, "
                                        "[0, 0], 1, [bias2.reshape(-1)], w_constant=True).view(4, 32, 1, 1)");
  EXPECT_FALSE(kernel_family_named("conv")->channels_last(cp.to_json(), c.to_json()).writes)
      << "[n, k] sums have no channels-last order";

  // A spatial sum without keepdim returns the op's [n, k] as it is.
  GraphDoc s = conv_relu_bias_pooled("aten.sum.dim_IntList", Json::array({2, 3}), false);
  Plan sp = plan_of(s);
  const Match& sm = conv_match(sp);
  ConvProblem scp = conv_problem_from_match(sm, sp.graph, Numerics::tf32, Arch::sm90);
  EXPECT_EQ(scp.reduce, "sum");
  ConvConfig sc = enumerate_conv_configs(scp, 1).ranked.at(0);
  EXPECT_TRUE(has(generate_conv_kernel(sc).text, "constexpr bool kMean = false;"));
  EXPECT_FALSE(has(composed_call(sp, sm, scp, sc), ".view("));

  // A transposed convolution's phases each add their pixels' sums.
  GraphDoc t = conv_transpose_relu();
  t.json()["outputs"] = Json::array();
  t.op("pool", "aten.mean.dim", {ref_to("relu"), Json::array({2, 3}), true}, {2, 32, 1, 1});
  t.output("pool");
  Plan tp = plan_of(t);
  ConvProblem tcp = conv_problem_from_match(conv_match(tp), tp.graph, Numerics::tf32, Arch::sm90);
  EXPECT_TRUE(tcp.transposed);
  EXPECT_EQ(tcp.reduce, "mean");
}

// KernelBench's Conv2d_Scaling_Min (torch.min over dim 1, which the tracer writes as amin): each pixel's minimum over
// the channels, computed where one N tile holds all of them, into [n, 1, pixels].
TEST(ConvFamily, AMinimumOverTheChannelsIsTakenInTheEpilogue) {
  for (bool keepdim : {true, false}) {
    GraphDoc d = conv_relu_bias();
    d.json()["outputs"] = Json::array();
    d.op("least", "aten.amin.default", {ref_to("add"), Json::array({1}), keepdim},
         keepdim ? std::vector<int64_t>{4, 1, 16, 16} : std::vector<int64_t>{4, 16, 16});
    d.output("least");
    Plan p = plan_of(d);
    const Match& m = conv_match(p);
    EXPECT_EQ(m.anchor, "least");
    EXPECT_EQ(m.kernel.value("reduce", ""), "min");
    EXPECT_EQ(m.kernel.value("reduce_over", ""), "channels");
    ConvProblem cp = conv_problem_from_match(m, p.graph, Numerics::tf32, Arch::sm90);
    EXPECT_EQ(cp.result_shape(), (std::vector<int64_t>{4, 1, 16, 16}));
    EXPECT_EQ(ConvProblem::from_json(cp.to_json()).to_json(), cp.to_json());
    auto space = enumerate_conv_configs(cp, 1000);
    ASSERT_FALSE(space.ranked.empty());
    for (const auto& c : space.ranked) EXPECT_TRUE(c.tile_n >= 32 && c.cluster_n == 1) << c.summary();
    ConvConfig narrow = space.ranked.at(0);
    narrow.tile_n = 16;
    EXPECT_TRUE(has(conv_config_rejection(cp, narrow), "needs every one of the 32 in one tile"));
    ConvConfig c = space.ranked.at(0);
    std::string kernel = generate_conv_kernel(c).text;
    EXPECT_TRUE(has(kernel, "constexpr int kReduce = 2;")) << "fact_evt::kChannels";
    EXPECT_TRUE(has(kernel, "constexpr int kReduceOp = 2;")) << "fact_evt::kMin";
    EXPECT_TRUE(has(kernel, "store.channels = kReduce == fact_evt::kChannels ? 1 : a.k;"));
    EXPECT_TRUE(has(generate_conv_op_wrapper(c).text, "if (2 == 2) sizes[1] = 1;"));
    std::string call = composed_call(p, m, cp, c);
    EXPECT_EQ(has(call, ".view(4, 16, 16)"), !keepdim) << call;
  }
}

TEST(ConvFamily, OnlyAReductionOverThePixelsOrTheChannelsOfAnFp32ConvsOwnValueJoinsIt) {
  auto reduce_of = [](GraphDoc& d) { return conv_match(plan_of(d)).kernel.value("reduce", ""); };
  GraphDoc rows = conv_relu_bias_pooled("aten.mean.dim", Json::array({2}), true);
  EXPECT_EQ(reduce_of(rows), "") << "nor one over the rows alone";
  GraphDoc shared = conv_relu_bias_pooled("aten.mean.dim", Json::array({2, 3}), true);
  shared.op("twice", "aten.mul.Tensor", {ref_to("add"), 2.0}, {4, 32, 16, 16});
  shared.output("twice");
  EXPECT_EQ(reduce_of(shared), "") << "the conv's value is read elsewhere: it is written";
  GraphDoc half = conv_relu_bias_pooled("aten.mean.dim", Json::array({2, 3}), true, "bfloat16");
  EXPECT_EQ(conv_match(plan_of(half, Numerics::bf16)).kernel.value("reduce", ""), "") << "fp32 atomics only";

  GraphDoc d = conv_relu_bias();
  ConvProblem p = problem_of(d);
  p.reduce = "max";
  p.reduce_over = "pixels";
  EXPECT_THROW(p.validate(), Error) << "pixels are summed by atomics: sums and means only";
  p.reduce_over = "channels";
  p.validate();
  p.reduce_over = "";
  EXPECT_THROW(p.validate(), Error);
  p.reduce = "sum";
  p.reduce_over = "pixels";
  p.validate();
  p.element = Element::bf16;
  EXPECT_THROW(p.validate(), Error);
}

// A transposed convolution of groups 4 (KernelBench level1/72, 75): no rule takes it, and the plan says which rule's
// constraint kept it out, with the value it saw, beside "Left to PyTorch".
TEST(ConvFamily, AGroupedTransposedConvolutionStaysPyTorchsWithTheConstraintNamed) {
  GraphDoc d;
  d.input("w", {16, 8, 3, 3}, "float32", "parameter").input("x", {2, 16, 8, 8});
  d.op("convt", "aten.conv_transpose2d.input",
       {ref_to("x"), ref_to("w"), nullptr, Json::array({2, 2}), Json::array({1, 1}), Json::array({1, 1}), 4,
        Json::array({1, 1})},
       {2, 32, 16, 16});
  d.output("convt");
  Plan p = plan_of(d);
  EXPECT_TRUE(p.entries.empty());
  EXPECT_EQ(discover::left_to_pytorch(p), "aten.conv_transpose2d.input x1");
  EXPECT_NE(std::find(p.notes.begin(), p.notes.end(),
                      "aten.conv_transpose2d.input at node 'convt' stays PyTorch's: rule 'conv_transpose' needs "
                      "groups == 1 (groups = 4)"),
            p.notes.end())
      << fmt::format("{}", fmt::join(p.notes, " | "));
  // A node some rule takes gets no such note (conv_transpose of groups 1, though other rules near-missed it).
  GraphDoc ungrouped = conv_transpose_relu();
  Plan q = plan_of(ungrouped);
  for (const auto& n : q.notes) EXPECT_EQ(n.find("stays PyTorch's"), std::string::npos) << n;
}

TEST(ConvFamily, TransposedConvolutionsMatchWithTheirEpilogueAndCutIntoPhases) {
  GraphDoc d = conv_transpose_relu();
  Plan p = plan_of(d);
  const Match& m = conv_match(p);
  EXPECT_EQ(m.rule, "conv_transpose");
  EXPECT_EQ(m.nodes, (std::vector<std::string>{"convt", "relu"}));
  ConvProblem cp = conv_problem_from_match(m, p.graph, Numerics::tf32, Arch::sm90);
  EXPECT_TRUE(cp.transposed);
  EXPECT_EQ(cp.c, 16) << "x's channels: w's dim 0 when transposed";
  EXPECT_EQ(cp.k, 32);
  EXPECT_EQ(cp.out, (ConvDims{1, 16, 16}));
  EXPECT_EQ(cp.output_padding, (ConvDims{0, 1, 1}));
  EXPECT_EQ(cp.gemm_k(), 16 * 2 * 2) << "an output takes at most ceil(3 / 2) taps a dim";
  EXPECT_EQ(cp.epilogue.tree.text(), "relu(add(mul(alpha,acc),row(bias)))");
  EXPECT_EQ(ConvProblem::from_json(cp.to_json()).to_json(), cp.to_json());
  // Outputs (o + 1) mod 2 == 0 take taps 0 and 2, the others tap 1: two stride-1 convolutions a dim.
  auto phases = conv_transposed_phases(cp, 2);
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[0].taps, 2);
  EXPECT_EQ(phases[0].first, 0);
  EXPECT_EQ(phases[0].outputs, 8);
  EXPECT_EQ(phases[0].offset, 1) << "q' = 0 is output 1";
  EXPECT_EQ(phases[1].taps, 1);
  EXPECT_EQ(phases[1].first, 1);
  EXPECT_EQ(phases[1].offset, 0);
  auto depth = conv_transposed_phases(cp, 0);
  ASSERT_EQ(depth.size(), 1u) << "the unused depth dim is one trivial phase";
  EXPECT_EQ(depth[0].taps * depth[0].outputs, 1);
  nlohmann::json no_flag = cp.to_json();
  no_flag.erase("transposed");
  no_flag.erase("output_padding");
  EXPECT_FALSE(ConvProblem::from_json(no_flag).transposed) << "problems recorded before were forward";

  // conv_transpose1d's one overload is .default (2-D and 3-D have .input): KernelBench level1/64's call.
  GraphDoc d1;
  d1.input("w", {16, 32, 3}, "float32", "parameter").input("x", {2, 16, 50});
  d1.op("convt", "aten.conv_transpose1d.default", {ref_to("x"), ref_to("w")}, {2, 32, 52});
  d1.output("convt");
  ConvProblem p1 = problem_of(d1);
  EXPECT_TRUE(p1.transposed);
  EXPECT_EQ(p1.spatial_dims, 1);
  EXPECT_EQ(p1.out, (ConvDims{1, 1, 52}));
}

// A 1-D transposed convolution of 4 channels (the dims are independent: one tests them all) and its scatter
// definition, PyTorch's: output i * stride - padding + t * dilation gets x[i] * w[t], with x[i] and w[t] distinct
// enough that sums of distinct products identify the pairs.
ConvProblem transposed_1d(int64_t in, int64_t r, int64_t s, int64_t dil, int64_t pad, int64_t op) {
  ConvProblem p;
  p.transposed = true;
  p.spatial_dims = 1;
  p.n = 1, p.c = 4, p.k = 4;
  p.in[2] = in, p.filter[2] = r, p.stride[2] = s, p.dilation[2] = dil, p.padding[2] = pad;
  p.output_padding[2] = op;
  p.out[2] = p.expected_out(2);
  return p;
}
double x_1d(int64_t i) { return double(i + 1); }
double w_1d(int64_t t) { return double(100 * (t + 1)); }
std::vector<double> scatter_definition(const ConvProblem& p) {
  std::vector<double> out(p.out[2], 0.0);
  for (int64_t i = 0; i < p.in[2]; ++i)
    for (int64_t t = 0; t < p.filter[2]; ++t)
      if (int64_t o = i * p.stride[2] - p.padding[2] + t * p.dilation[2]; o >= 0 && o < p.out[2]) out[o] += x_1d(i) * w_1d(t);
  return out;
}

// The phases recompose the transposed convolution: each output exactly once, with the products PyTorch's definition
// (output i * stride - padding + r * dilation gets x[i] * w[r]) sums, over strides, dilations, paddings, filters
// and output paddings (1-D: the dims are independent).
TEST(ConvFamily, TransposedPhasesRecomposeTheScatterDefinition) {
  int checked = 0;
  for (int64_t s : {1, 2, 3})
    for (int64_t dil : {1, 2, 3})
      for (int64_t r : {1, 2, 3, 4, 5})
        for (int64_t pad : {0, 1, 2})
          for (int64_t op = 0; op < std::max(s, dil); ++op)
            for (int64_t in : {1, 4, 7}) {
              ConvProblem p = transposed_1d(in, r, s, dil, pad, op);
              if (p.out[2] <= 0) continue;
              std::vector<ConvPhase> phases;
              try {
                phases = conv_transposed_phases(p, 2);
              } catch (const Error& e) {
                const std::string why = e.what();
                EXPECT_TRUE(has(why, "common factor") || has(why, "no tap") || has(why, "past x's edge")) << why;
                continue;
              }
              const std::vector<double> want = scatter_definition(p);
              std::vector<double> got(p.out[2], 0.0);
              std::vector<int> written(p.out[2], 0);
              for (const ConvPhase& ph : phases)
                for (int64_t q = 0; q < ph.outputs; ++q) {
                  int64_t o = s * q + ph.offset;
                  ASSERT_TRUE(o >= 0 && o < p.out[2]) << "s " << s << " d " << dil << " r " << r << " p " << pad;
                  ++written[o];
                  for (int64_t m = 0; m < ph.taps; ++m) {  // forward: x[q - lower + m * d] * sub-filter[m]
                    int64_t i = q - ph.lower + m * dil;
                    if (i >= 0 && i < in) got[o] += x_1d(i) * w_1d(ph.first + s * (ph.taps - 1 - m));
                  }
                  // The forward convolution's own output count is the phase's.
                  EXPECT_EQ(in + ph.lower + ph.upper - dil * (ph.taps - 1), ph.outputs);
                }
              for (int64_t o = 0; o < p.out[2]; ++o) {
                ASSERT_EQ(written[o], 1) << "output " << o << " s " << s << " d " << dil << " r " << r << " p " << pad;
                ASSERT_EQ(got[o], want[o]) << "output " << o << " s " << s << " d " << dil << " r " << r << " p " << pad;
              }
              ++checked;
            }
  EXPECT_GT(checked, 300);
}

TEST(ConvFamily, TransposedConvolutionsThatAreNoForwardPhasesStayPyTorchs) {
  auto why = [](GraphDoc d) {
    try {
      problem_of(d);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("taken");
  };
  // stride 2, dilation 2: odd outputs only get the bias.
  EXPECT_TRUE(has(why(conv_transpose_relu(Json::array({2, 2}), Json::array({2, 2}), {3, 3}, Json::array({1, 1}),
                                          Json::array({1, 1}), {2, 32, 18, 18})),
                  "common factor"));
  // a 1x1 filter of stride 2: the odd outputs take no tap.
  EXPECT_TRUE(has(why(conv_transpose_relu(Json::array({2, 2}), Json::array({1, 1}), {1, 1}, Json::array({0, 0}),
                                          Json::array({1, 1}), {2, 32, 16, 16})),
                  "no tap"));
  // KernelBench level1/81's stride 5, dilation 2, padding 1: a phase's window starts inside x.
  EXPECT_TRUE(has(why(conv_transpose_relu(Json::array({5, 5}), Json::array({2, 2}), {3, 3}, Json::array({1, 1}),
                                          Json::array({0, 0}), {2, 32, 38, 38})),
                  "past x's edge"));
  // A residual after it: the rule's kernel reads none ("reads_residual": false), so the epilogue stops before the
  // add, which stays free for another pattern (level2/26's add and hardswish: a generated row-wise kernel).
  GraphDoc res;
  res.input("w", {16, 32, 3, 3}, "float32", "parameter").input("x", {2, 16, 8, 8}).input("r", {2, 32, 10, 10});
  res.op("convt", "aten.conv_transpose2d.input", {ref_to("x"), ref_to("w")}, {2, 32, 10, 10});
  res.op("add", "aten.add.Tensor", {ref_to("convt"), ref_to("r")}, {2, 32, 10, 10});
  res.op("relu", "aten.relu.default", {ref_to("add")}, {2, 32, 10, 10});
  res.output("relu");
  Plan p = plan_of(res);
  const Match& m = conv_match(p);
  EXPECT_EQ(m.nodes, (std::vector<std::string>{"convt"}));
  EXPECT_EQ(why(res), "taken");
  EXPECT_TRUE(std::any_of(p.entries.begin(), p.entries.end(), [](const auto& e) {
    return std::find(e.match.nodes.begin(), e.match.nodes.end(), "add") != e.match.nodes.end();
  })) << "the add and relu go to another pattern";
  ConvProblem rp = problem_of(res);
  rp.epilogue = Epilogue::of(EpilogueTree::from_json(nlohmann::json::parse(R"(["add", ["mul", "alpha", "acc"], "residual"])")));
  try {
    rp.validate();
    FAIL() << "a transposed convolution's problem with a residual";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "reads a residual")) << e.what();
  }
}

TEST(ConvFamily, TransposedCallPassesOutputPaddingAndTheKernelGathersSubFilters) {
  GraphDoc d = conv_transpose_relu();
  Plan p = plan_of(d);
  const Match& m = conv_match(p);
  ConvProblem cp = conv_problem_from_match(m, p.graph, Numerics::tf32, Arch::sm90);
  ConvConfig c = enumerate_conv_configs(cp, 1).ranked.at(0);
  EXPECT_EQ(composed_call(p, m, cp, c),
            "torch.ops.fact." + c.id() + "(x, w, b, None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1, [], "
            "w_constant=True)");
  std::string kernel = generate_conv_kernel(c).text;
  EXPECT_TRUE(has(kernel, "for (const Launch& l : p.launches) gather(a, l, base + w.filters + l.filter_offset, stream);"));
  // One forward launch a group of phases (its first launch's params carry the others').
  EXPECT_TRUE(has(kernel, "if (p.launches[i].members == 0) continue;"));
  std::string op = generate_conv_op_wrapper(c).text;
  EXPECT_TRUE(has(op, "a.k = w.size(1 - w_in);")) << "w is [c, k, ...] when transposed";
}

// fp32-accurate convolutions (`--conv-numerics 3xtf32`, measured against cuDNN with TF32 off): an fp32-accurate plan's
// convolutions take the plan's conv numerics (TF32 by default, as PyTorch's cuDNN), and a 3xTF32 kernel runs the TF32
// conv over three channel blocks of x' = [x_small, x_big, x_big] and w' = [w_big, w_small, w_big].
TEST(ConvFamily, Fp32AccurateConvolutionsRunOverThreeTf32ChannelBlocks) {
  GraphDoc d = conv_relu_bias();
  Plan plan = plan_of(d);
  EXPECT_EQ(plan.conv_numerics, Numerics::tf32) << "PyTorch's default: cuDNN convolutions in TF32";
  EXPECT_EQ(discover::family_numerics(plan, "conv", plan.numerics), Numerics::tf32);
  plan.conv_numerics = Numerics::x3tf32;
  EXPECT_EQ(discover::family_numerics(plan, "conv", Numerics::x3tf32), Numerics::x3tf32);
  EXPECT_EQ(discover::family_numerics(plan, "gemm", Numerics::x3tf32), Numerics::x3tf32);
  EXPECT_EQ(discover::family_numerics(plan, "conv", Numerics::tf32), Numerics::tf32) << "a tf32 plan stays tf32";
  EXPECT_EQ(discover::family_numerics(plan, "conv", Numerics::bf16), Numerics::bf16);
  // The cost model prices them so: cuDNN's fp32 (TF32 off) against FACT's 3xTF32.
  static const auto registry = discover::PatternRegistry::builtin();
  Plan accurate = discover::make_plan(d.graph(), registry, ir::OpTable::builtin(), ArchSpec::builtin("sm90"),
                                      Numerics::x3tf32, Numerics::x3tf32);
  EXPECT_EQ(accurate.conv_numerics, Numerics::x3tf32);
  auto conv_cost = [](const Plan& p) {
    for (const auto& e : p.entries)
      if (e.match.family == "conv") return e.cost;
    throw Error("no conv entry");
  };
  EXPECT_GT(conv_cost(accurate).seconds_now, conv_cost(plan).seconds_now) << "cuDNN without TF32";
  EXPECT_GT(conv_cost(accurate).seconds_fused, conv_cost(plan).seconds_fused) << "3xTF32 takes three MMAs";
  EXPECT_THROW(discover::make_plan(d.graph(), registry, ir::OpTable::builtin(), ArchSpec::builtin("sm90"),
                                   Numerics::x3tf32, Numerics::bf16), Error);
  Json doc = discover::to_json(plan);
  EXPECT_EQ(doc.at("conv_numerics"), "3xtf32");
  EXPECT_EQ(discover::plan_from_json(doc, "plan.json", ir::OpTable::builtin()).conv_numerics, Numerics::x3tf32);
  doc.erase("conv_numerics");
  EXPECT_EQ(discover::plan_from_json(doc, "plan.json", ir::OpTable::builtin()).conv_numerics, Numerics::tf32)
      << "plans written before conv numerics ran TF32";

  ConvProblem p = conv_problem_from_match(conv_match(plan), plan.graph, Numerics::x3tf32, Arch::sm90);
  EXPECT_TRUE(p.x3tf32);
  EXPECT_EQ(p.numerics(), Numerics::x3tf32);
  EXPECT_EQ(p.to_json().at("numerics"), "3xtf32");
  EXPECT_TRUE(ConvProblem::from_json(p.to_json()).x3tf32);
  EXPECT_EQ(p.kernel_channels(false), 3 * 16);
  EXPECT_FALSE(p.can_fold_width());
  ConvProblem tf32 = conv_problem_from_match(conv_match(plan), plan.graph, Numerics::tf32, Arch::sm90);
  EXPECT_FALSE(tf32.x3tf32);
  EXPECT_FALSE(tf32.to_json().contains("x3tf32"));

  auto space = enumerate_conv_configs(p, 1000).ranked;
  ASSERT_FALSE(space.empty());
  for (const auto& k : space) {
    EXPECT_TRUE(k.x3tf32) << k.summary();
    EXPECT_FALSE(k.fold_width) << k.summary();
    EXPECT_EQ(k.tile_k, 16) << "48 channels load no zeros in 64-byte K tiles";
    EXPECT_EQ(k.promotion_k_blocks, 16) << "conv.json's x3tf32_promotion_k_blocks";
    // Promoted: the tensor cores' partial sums and the fp32 totals both in registers, at most 128 a thread.
    EXPECT_LE(2 * k.tile_m * k.tile_n / (128 * (k.pingpong ? 1 : k.consumer_warpgroups)),
              k.ctas_per_sm == 2 && k.consumer_warpgroups == 2 ? 32 : 128) << k.summary();
  }
  ConvConfig wide = space.front();
  wide.tile_m = 128, wide.tile_n = 64, wide.consumer_warpgroups = 2, wide.ctas_per_sm = 2, wide.pingpong = false;
  wide.splits = 1;
  EXPECT_TRUE(has(conv_config_rejection(p, wide), "3xTF32's promoted sums")) << conv_config_rejection(p, wide);
  wide.promotion_k_blocks = 0;  // a config recorded before promotion still builds as it did
  EXPECT_EQ(conv_config_rejection(p, wide), "");
  EXPECT_FALSE(wide.to_json().contains("promotion_k_blocks"));
  const ConvConfig& top = space.front();
  EXPECT_TRUE(has(top.summary(), "float32 3xtf32 "));
  EXPECT_EQ(top.to_json().at("numerics"), "3xtf32");
  EXPECT_EQ(ConvConfig::from_json(top.to_json()).id(), top.id());
  ConvConfig as_tf32 = top;
  as_tf32.x3tf32 = false;
  EXPECT_NE(as_tf32.id(), top.id());
  EXPECT_FALSE(as_tf32.to_json().contains("numerics")) << "TF32 configs keep their ids";
  EXPECT_TRUE(has(conv_config_rejection(p, as_tf32), "a TF32 kernel")) << conv_config_rejection(p, as_tf32);
  EXPECT_TRUE(has(conv_config_rejection(tf32, top), "a 3xTF32 kernel")) << conv_config_rejection(tf32, top);

  std::string kernel = generate_conv_kernel(top).text;
  EXPECT_TRUE(has(kernel, "constexpr bool kX3tf32 = true;"));
  EXPECT_TRUE(has(kernel, "l.channels = padded_channels(a) * kChannelBlocks;"));
  EXPECT_TRUE(has(kernel, "transpose<kX3tf32>(a.x, base + w.x, a.n, a.c, in_pixels, padded_channels(a), stream);"));
  EXPECT_TRUE(has(kernel, "split(a.x, base + w.x, a.n * in_pixels, a.c, padded_channels(a), false, stream);"))
      << "x from a chain of convolutions (channels-last) split too";
  EXPECT_TRUE(has(kernel, "split(a.w, base + w.filters, a.k * spatial_size(a.filter_extent), padded_channels(a), "
                          "padded_channels(a), true,"))
      << "the filter's blocks big, small, big";
  EXPECT_TRUE(has(generate_conv_kernel(as_tf32).text, "constexpr bool kX3tf32 = false;"));

  // A transposed convolution's phases gather their sub-filters split (big, small, big) instead of split_rows.
  GraphDoc t = conv_transpose_relu();
  Plan tp = plan_of(t);
  ConvProblem tcp = conv_problem_from_match(conv_match(tp), tp.graph, Numerics::x3tf32, Arch::sm90);
  ASSERT_TRUE(tcp.x3tf32 && tcp.transposed);
  std::string tk = generate_conv_kernel(enumerate_conv_configs(tcp, 1).ranked.at(0)).text;
  EXPECT_TRUE(has(tk, "SubFilter f{a.c, padded_channels(a) * kChannelBlocks, a.k, {}, {}, {}, {}, {}};"));
  EXPECT_TRUE(has(tk, "return Element(block == 1 ? tf32_small(float(v), big) : big);"));
  EXPECT_TRUE(has(tk, "out[e] = filter_block_value(src >= 0 ? w[src] : Element(0), block);"));
  EXPECT_TRUE(has(tk, "if (kX3tf32 && !a.transposed)")) << "no split_rows of the whole filter";
}

TEST(ConvCodegenNvcc, Sm90Fp32GrownEpilogueCompiles) {
  GraphDoc d = conv_relu_bias();
  ConvConfig c = enumerate_conv_configs(problem_of(d), 1).ranked.at(0);
  expect_kernel_compiles(c.arch, generate_conv_kernel(c).text, "sm90_fp32_conv2d_relu_bias", c.summary());
}

// A residual (a same-shaped tensor added after the conv) rides in as the collective's C, read channels-last from the
// workspace, while the output still leaves through the channels-first store node: both paths of the template, in the
// persistent loop, whose producer warp also issues the residual's loads tile after tile.
// The config and epilogue are those of ResNet-50's residual blocks on the H100 (64x128, two CTAs a SM; BatchNorm, the
// residual, ReLU): its C stages beside the D stages once left the mainloop under two stages, which nvcc refused.
TEST(ConvCodegenNvcc, Sm90Fp32ResidualEpilogueCompiles) {
  GraphDoc d;
  d.input("w", {128, 64, 1, 1}, "float32", "parameter").input("x", {4, 64, 16, 16}).input("r", {4, 128, 16, 16});
  for (const char* v : {"bn_w", "bn_b", "bn_rm", "bn_rv"}) d.input(v, {128}, "float32", "buffer");
  d.op("conv2d", "aten.conv2d.default", {ref_to("x"), ref_to("w")}, {4, 128, 16, 16});
  d.op("bn", "aten.batch_norm.default", {ref_to("conv2d"), ref_to("bn_w"), ref_to("bn_b"), ref_to("bn_rm"),
                                         ref_to("bn_rv"), false, 0.1, 1e-05, false}, {4, 128, 16, 16});
  d.op("add", "aten.add.Tensor", {ref_to("bn"), ref_to("r")}, {4, 128, 16, 16});
  d.op("relu", "aten.relu.default", {ref_to("add")}, {4, 128, 16, 16});
  d.output("relu");
  auto space = enumerate_conv_configs(problem_of(d), 100).ranked;
  auto single = std::find_if(space.begin(), space.end(), [](const ConvConfig& k) {
    return k.cluster_m * k.cluster_n == 1 && k.tile_m == 64 && k.tile_n == 128 && k.ctas_per_sm == 2;
  });
  ASSERT_NE(single, space.end());
  const ConvConfig& c = *single;
  ASSERT_TRUE(c.epilogue.tree.reads_source("residual")) << c.epilogue.tree.text();
  std::string kernel = generate_conv_kernel(c).text;
  EXPECT_TRUE(has(kernel, "constexpr bool kHasResidual = true;"));
  EXPECT_TRUE(has(kernel, "fact_act::rsqrt_f32(x)")) << "BatchNorm's rsqrt, a generated functor";
  expect_kernel_compiles(c.arch, kernel, "sm90_fp32_conv2d_residual", c.summary());
  // A 32-channel-wide tile (MobileNet's narrow projections), the same epilogue.
  ConvConfig narrow = c;
  narrow.tile_m = 128;
  narrow.tile_n = 32;
  ASSERT_EQ(conv_config_rejection(problem_of(d), narrow), "");
  expect_kernel_compiles(narrow.arch, generate_conv_kernel(narrow).text, "sm90_fp32_conv2d_residual_n32",
                         narrow.summary());
}

// A width-folded kernel (ResNet's 7x7 stride-2 stem over 3 channels): the gather of x' and the launch of width 1,
// compiled for sm_90a.
// 3xTF32 kernels (the split copies of x, from either order, and of the filter; three channel blocks a tap), forward and
// transposed (each phase's sub-filter gathered split).
TEST(ConvCodegenNvcc, Sm90Fp32X3tf32ForwardAndTransposedCompile) {
  for (auto [d, name] : {std::pair{conv_relu_bias(), "sm90_3xtf32_conv2d_relu_bias"},
                         std::pair{conv_transpose_relu(), "sm90_3xtf32_conv_transpose2d_relu"}}) {
    Plan p = plan_of(d);
    ConvProblem cp = conv_problem_from_match(conv_match(p), p.graph, Numerics::x3tf32, Arch::sm90);
    ConvConfig c = enumerate_conv_configs(cp, 1).ranked.at(0);
    ASSERT_TRUE(c.x3tf32);
    // The tensor cores' sums are promoted into fp32 registers (fp32's accuracy needs it; the mainloop says why).
    ASSERT_GT(c.promotion_k_blocks, 0) << c.summary();
    std::string kernel = generate_conv_kernel(c).text;
    EXPECT_TRUE(has(kernel, "constexpr int kPromotionKBlocks = " + std::to_string(c.promotion_k_blocks) + ";"));
    expect_kernel_compiles(c.arch, kernel, name, c.summary());
  }
}

// A transposed convolution's phases as the kernel runs them, its host and host-device parts compiled by nvcc and run on
// the host: launches() (the phases, their groups on one grid and with as many taps: PersistentConv's Group), each
// phase's sub-filter (sub_filter_source: the phase's own taps, zeros after), a stride-1 forward convolution over each
// padded grid, and the store's placement of its rows (ConvOutputStore::row_offset over store_arguments: -1 past the
// output), against the scatter definition: every output element written once, with its value, over strides 1-5
// (five width phases: groups across the height's phases, the last one short), uneven filters, dilations, paddings and
// output paddings, channels-first and channels-last outputs. CUTLASS's own
// output extent of each phase's forward problem is its group's grid.
TEST(ConvCodegenNvcc, TransposedPhaseGroupsRunOnTheHostAsTheScatterDefinition) {
  GraphDoc d = conv_transpose_relu();
  ConvConfig c = enumerate_conv_configs(problem_of(d), 1).ranked.at(0);
  ASSERT_EQ(c.splits, 1) << "split kernels run a launch a phase";
  std::string text = generate_conv_kernel(c).text;
  text += R"(
#include <cstdio>
#include <vector>
int main() {
  struct Case { int64_t in[2], filter[2], stride[2], padding[2], output_padding[2], dilation[2]; size_t group; };
  const Case cases[] = {{{5, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 4},   // k3 s2: taps 2 and 1 a dim
                        {{4, 5}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 4},   // k4 s2: equal taps
                        {{3, 7}, {4, 3}, {3, 2}, {0, 1}, {2, 0}, {1, 1}, 2},   // height's phases apart
                        {{4, 3}, {3, 5}, {1, 3}, {1, 2}, {0, 1}, {1, 1}, 3},
                        {{3, 4}, {2, 5}, {2, 4}, {0, 1}, {1, 3}, {1, 1}, 4},   // the width's four alone
                        {{5, 5}, {3, 3}, {2, 2}, {2, 1}, {1, 0}, {3, 1}, 4},   // dilated
                        {{3, 6}, {3, 5}, {2, 5}, {1, 0}, {0, 0}, {1, 2}, 4}};  // five width phases: groups of 4, 4, 2
  int bad = 0, checked = 0;
  for (const Case& cs : cases)
    for (int64_t layout : {int64_t(0), kOutLast}) {
      FactConvArgs a{};
      a.n = 2, a.c = 3, a.k = 8, a.transposed = 1, a.groups = 1, a.channels_last = layout;
      for (int i = 0; i < 3; ++i) {
        const int j = i - 1;  // dims 1, 2 are the case's; dim 0 (depth) is trivial
        a.in_extent[i] = j < 0 ? 1 : cs.in[j];
        a.filter_extent[i] = j < 0 ? 1 : cs.filter[j];
        a.stride[i] = j < 0 ? 1 : cs.stride[j];
        a.padding[i] = j < 0 ? 0 : cs.padding[j];
        a.dilation[i] = j < 0 ? 1 : cs.dilation[j];
        a.out_extent[i] = transposed_out(a, i) + (j < 0 ? 0 : cs.output_padding[j]);
      }
      const std::vector<Launch> ls = launches(a);
      if (ls.empty()) { std::printf("case %d: no launches\n", checked++); ++bad; continue; }
      const int64_t n = a.n, c = a.c, k = a.k, H = a.in_extent[1], W = a.in_extent[2], R = a.filter_extent[1],
                    S = a.filter_extent[2], OH = a.out_extent[1], OW = a.out_extent[2], cw = padded_channels(a);
      std::vector<double> x(n * c * H * W), w(c * k * R * S), want(n * k * OH * OW, 0.0), got(want.size(), 0.0);
      std::vector<int> written(want.size(), 0);
      for (size_t i = 0; i < x.size(); ++i) x[i] = double((i * 37) % 101) - 50.0;
      for (size_t i = 0; i < w.size(); ++i) w[i] = double((i * 53) % 89) / 16.0 - 2.5;
      auto out_index = [&](int64_t b, int64_t kk, int64_t oh, int64_t ow) {
        return layout ? ((b * OH + oh) * OW + ow) * k + kk : ((b * k + kk) * OH + oh) * OW + ow;
      };
      for (int64_t b = 0; b < n; ++b)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t i = 0; i < H; ++i)
            for (int64_t j = 0; j < W; ++j)
              for (int64_t kk = 0; kk < k; ++kk)
                for (int64_t r = 0; r < R; ++r)
                  for (int64_t s = 0; s < S; ++s) {
                    const int64_t oh = i * a.stride[1] - a.padding[1] + r * a.dilation[1],
                                  ow = j * a.stride[2] - a.padding[2] + s * a.dilation[2];
                    if (oh >= 0 && oh < OH && ow >= 0 && ow < OW)
                      want[out_index(b, kk, oh, ow)] += x[((b * c + ch) * H + i) * W + j] * w[((ch * k + kk) * R + r) * S + s];
                  }
      for (size_t first = 0; first < ls.size(); first += size_t(ls[first].members)) {
        const int members = ls[first].members;
        if (members < 1 || first + members > ls.size() || size_t(members) != std::min(cs.group, ls.size() - first)) {
          std::printf("case %d: a group of %d at launch %zu of %zu (want %zu)\n", checked, members, first, ls.size(), cs.group);
          ++bad;
          break;
        }
        for (size_t m = first; m < first + members; ++m) {
          const Launch& l = ls[m];
          // Each sub-filter in the workspace's filter area apart from the next (at its group's taps).
          if (m + 1 < ls.size() && ls[m + 1].filter_offset < l.filter_offset + sub_filter_bytes(a, l)) {
            std::printf("case %d: launch %zu's sub-filter overlaps the next\n", checked, m);
            ++bad;
          }
          if ((m > first && l.members != 0) || l.out[1] != ls[first].out[1] || l.out[2] != ls[first].out[2] ||
              l.filter[1] != ls[first].filter[1] || l.filter[2] != ls[first].filter[2]) {
            std::printf("case %d: launch %zu's grid or taps differ from its group's\n", checked, m);
            ++bad;
          }
          ProblemShape shape = problem_shape(a, l);
          if (shape.shape_C[1] != l.out[1] || shape.shape_C[2] != l.out[2]) {
            std::printf("case %d launch %zu: CUTLASS's output %d x %d, the grid %lld x %lld\n", checked, m,
                        shape.shape_C[1], shape.shape_C[2], (long long)l.out[1], (long long)l.out[2]);
            ++bad;
          }
          const SubFilter f = sub_filter_of(a, l);
          std::vector<double> sub(size_t(sub_filter_elements(a, l)), 0.0);
          for (size_t e = 0; e < sub.size(); ++e) {
            int64_t block;
            const int64_t src = sub_filter_source(f, int64_t(e), block);
            if (src >= int64_t(w.size())) { std::printf("case %d: sub-filter source %lld\n", checked, (long long)src); ++bad; continue; }
            sub[e] = src >= 0 ? w[size_t(src)] : 0.0;
          }
          const auto params = StoreNode::to_underlying_arguments(0, store_arguments(a, l), nullptr);
          const int64_t grid = l.out[1] * l.out[2];
          for (int64_t b = 0; b < n; ++b)
            for (int64_t g = 0; g < grid; ++g) {
              const int64_t offset = StoreNode::row_offset(params, int(b * grid + g));
              if (offset < 0) continue;  // a pixel of the group's grid past this phase's outputs
              const int64_t gy = g / l.out[2], gx = g % l.out[2];
              for (int64_t kk = 0; kk < k; ++kk) {
                double acc = 0.0;
                for (int64_t t = 0; t < l.filter[1]; ++t)
                  for (int64_t u = 0; u < l.filter[2]; ++u) {
                    const int64_t i = gy - l.pad_lo[1] + t * l.dilation[1], j = gx - l.pad_lo[2] + u * l.dilation[2];
                    if (i < 0 || i >= H || j < 0 || j >= W) continue;
                    for (int64_t ch = 0; ch < c; ++ch)
                      acc += x[((b * c + ch) * H + i) * W + j] * sub[size_t(((kk * l.filter[1] + t) * l.filter[2] + u) * cw + ch)];
                  }
                const int64_t e = offset + (layout ? kk : kk * OH * OW);
                if (e < 0 || e >= int64_t(got.size())) { std::printf("case %d: offset %lld out of range\n", checked, (long long)e); ++bad; continue; }
                got[size_t(e)] = acc;
                ++written[size_t(e)];
              }
            }
        }
      }
      for (size_t e = 0; e < want.size(); ++e)
        if ((written[e] != 1 || got[e] != want[e]) && bad++ < 8)
          std::printf("case %d layout %lld element %zu: written %d times, %g vs %g\n", checked, (long long)layout, e,
                      written[e], got[e], want[e]);
      ++checked;
    }
  std::printf("%d cases, %d mismatches\n", checked, bad);
  return bad != 0;
}
)";
  expect_runs_on_the_host(c.arch, text, "conv_transposed_phases_host");
}

// Transposed convolutions' grouped phases for sm_90a: a 2-D one whose epilogue reads a per-channel vector and a 3-D one
// of eight phases in two launches of four (KernelBench's ConvTranspose3d chains: stride 2 in every dim).
TEST(ConvCodegenNvcc, Sm90Fp32TransposedPhaseGroupsCompile) {
  GraphDoc d = conv_transpose_relu();
  ConvProblem p = problem_of(d);
  p.epilogue = Epilogue::of(EpilogueTree::from_json(
      Json::parse(R"(["add", ["relu", ["add", ["mul", "alpha", "acc"], {"row": "bias"}]], {"row": "vec0"}])")));
  ConvConfig c = enumerate_conv_configs(p, 1).ranked.at(0);
  expect_kernel_compiles(c.arch, generate_conv_kernel(c).text, "sm90_tf32_conv_transpose2d_vec", c.summary());
  GraphDoc d3;
  d3.input("w", {16, 32, 3, 3, 3}, "float32", "parameter").input("x", {2, 16, 6, 6, 6});
  d3.op("convt", "aten.conv_transpose3d.input", {ref_to("x"), ref_to("w"), nullptr, Json::array({2, 2, 2}),
                                                Json::array({1, 1, 1}), Json::array({1, 1, 1})}, {2, 32, 12, 12, 12});
  d3.op("relu", "aten.relu.default", {ref_to("convt")}, {2, 32, 12, 12, 12});
  d3.output("relu");
  ConvConfig c3 = enumerate_conv_configs(problem_of(d3), 1).ranked.at(0);
  ASSERT_EQ(c3.spatial_dims, 3) << c3.summary();
  expect_kernel_compiles(c3.arch, generate_conv_kernel(c3).text, "sm90_tf32_conv_transpose3d", c3.summary());
}

// The reducing store node (ConvProblem::reduce): a mean over the pixels in a transposed convolution's phases (one a
// launch), a minimum over the channels of a forward one by two consumer warpgroups (two threads a row of 128).
TEST(ConvCodegenNvcc, Sm90Fp32ReducingEpilogueCompiles) {
  GraphDoc d = conv_transpose_relu();
  d.json()["outputs"] = Json::array();
  d.op("pool", "aten.mean.dim", {ref_to("relu"), Json::array({2, 3}), true}, {2, 32, 1, 1});
  d.output("pool");
  ConvConfig c = enumerate_conv_configs(problem_of(d), 1).ranked.at(0);
  ASSERT_EQ(c.reduce, "mean");
  expect_kernel_compiles(c.arch, generate_conv_kernel(c).text, "sm90_tf32_conv_transpose2d_mean", c.summary());
  GraphDoc f = conv_relu_bias();
  f.json()["outputs"] = Json::array();
  f.op("least", "aten.amin.default", {ref_to("add"), Json::array({1}), true}, {4, 1, 16, 16});
  f.output("least");
  ConvProblem fp = problem_of(f);
  ConvConfig two;
  for (const auto& k : enumerate_conv_configs(fp, 1000).ranked)
    if (k.consumer_warpgroups == 2 && !k.pingpong) two = k;
  ASSERT_EQ(two.consumer_warpgroups, 2);
  ASSERT_EQ(two.reduce_over, "channels");
  expect_kernel_compiles(two.arch, generate_conv_kernel(two).text, "sm90_tf32_conv2d_min_channels", two.summary());
}

TEST(ConvCodegenNvcc, Sm90Fp32WidthFoldedStemCompiles) {
  GraphDoc stem = resnet_stem();
  ConvConfig c = enumerate_conv_configs(problem_of(stem), 1).ranked.at(0);
  ASSERT_TRUE(c.fold_width) << c.summary();
  expect_kernel_compiles(c.arch, generate_conv_kernel(c).text, "sm90_fp32_conv2d_folded_stem", c.summary());
}

// Two consumer warpgroups on one 128-row tile (CUTLASS's cooperative layout, built here since the conv builder refuses
// that schedule) in a 2x1 cluster, whose CTAs walk neighbouring tiles together so the filter tile is multicast on
// every tile: the persistent loop's cluster path and its register hand-over, compiled for sm_90a.
// Split in two, too: each unit's K range, the partials and the arrival counts of a cluster's tiles.
TEST(ConvCodegenNvcc, Sm90Fp32TwoWarpgroupsInAClusterSplitKCompile) {
  GraphDoc d = conv_relu_bias();
  ConvProblem p = problem_of(d);
  ConvConfig c = enumerate_conv_configs(p, 1).ranked.at(0);
  c.tile_m = 128;
  c.tile_n = 64;  // the problem's 32 output channels
  c.cluster_m = 2;
  c.cluster_n = 1;
  c.ctas_per_sm = 1;
  c.consumer_warpgroups = 2;
  c.splits = 2;
  ASSERT_EQ(conv_config_rejection(p, c), "");
  std::string kernel = generate_conv_kernel(c).text;
  EXPECT_TRUE(has(kernel, "constexpr int kConsumerWarpGroups = 2;"));
  EXPECT_TRUE(has(kernel, "constexpr int kSplits = 2;"));
  expect_kernel_compiles(c.arch, kernel, "sm90_fp32_conv2d_2wg_cluster", c.summary());
}

// Two CTAs a SM of two consumer warpgroups each (96 registers a consumer thread after the producer's hand-over)
// on a transposed convolution's problem: the register split and the phase launches compiled for sm_90a.
TEST(ConvCodegenNvcc, Sm90Fp32TwoCtasOfTwoWarpgroupsCompile) {
  GraphDoc d = conv_transpose_relu();
  ConvProblem p = problem_of(d);
  auto space = enumerate_conv_configs(p, 2).ranked;  // single CTAs, then two CTAs of two
  ASSERT_EQ(space.size(), 2u);
  const ConvConfig& c = space[1];
  ASSERT_TRUE(c.consumer_warpgroups == 2 && c.ctas_per_sm == 2) << c.summary();
  expect_kernel_compiles(c.arch, generate_conv_kernel(c).text, "sm90_fp32_conv2d_2wg_2cta", c.summary());
}

GraphDoc conv_relu_square(int64_t n, int64_t c, int64_t k, int64_t size, int64_t filter);

// A ping-pong kernel (two one-warpgroup consumers taking tiles in turn, 384 threads), compiled for sm_90a.
TEST(ConvCodegenNvcc, Sm90Fp32PingPongCompiles) {
  GraphDoc d = conv_relu_square(64, 64, 128, 256, 3);
  auto top = enumerate_conv_configs(problem_of(d), 3).ranked;
  ASSERT_EQ(top.size(), 3u);
  ASSERT_TRUE(top[2].pingpong) << top[2].summary();
  expect_kernel_compiles(top[2].arch, generate_conv_kernel(top[2]).text, "sm90_fp32_conv2d_pingpong", top[2].summary());
}

// The direct kernel of a depthwise convolution with a grown epilogue (two per-channel vectors, ReLU6's generated
// functor) and of a 3-D grouped one with a residual, off a chain and in one, and a depthwise one in a chain, compiled
// for sm_90a.
TEST(ConvCodegenNvcc, Sm90Fp32DirectGroupedKernelsCompile) {
  GraphDoc d = depthwise_bn_relu6();
  ConvConfig c = enumerate_conv_configs(problem_of(d), 1).ranked.at(0);
  ASSERT_TRUE(c.direct);
  GraphDoc g3;
  g3.input("w", {16, 2, 3, 3, 3}, "float32", "parameter").input("x", {2, 8, 6, 10, 10}).input("r", {2, 16, 4, 8, 8});
  g3.op("conv3d", "aten.conv3d.default", {ref_to("x"), ref_to("w"), nullptr, Json::array({1, 1, 1}),
                                          Json::array({0, 0, 0}), Json::array({1, 1, 1}), 4}, {2, 16, 4, 8, 8});
  g3.op("add", "aten.add.Tensor", {ref_to("conv3d"), ref_to("r")}, {2, 16, 4, 8, 8});
  g3.output("add");
  ConvConfig c3 = enumerate_conv_configs(problem_of(g3), 1).ranked.at(0);
  ASSERT_TRUE(c3.direct && c3.epilogue.tree.reads_source("residual")) << c3.summary();
  expect_kernel_compiles(c.arch, generate_conv_kernel(c).text, "sm90_fp32_conv2d_depthwise", c.summary());
  expect_kernel_compiles(c3.arch, generate_conv_kernel(c3).text, "sm90_fp32_conv3d_grouped_residual", c3.summary());
  // The same 3-D grouped convolution in a chain: the element kernel, any layout.
  ConvProblem chained = problem_of(g3);
  chained.channels_last = true;
  ConvConfig cl = enumerate_conv_configs(chained, 1).ranked.at(0);
  ASSERT_TRUE(cl.direct && cl.channels_last) << cl.summary();
  expect_kernel_compiles(cl.arch, generate_conv_kernel(cl).text, "sm90_fp32_conv3d_grouped_channels_last", cl.summary());
  // A depthwise one in a chain (MobileNet's): the vector kernel, its BatchNorm vectors loaded per channel.
  GraphDoc dwd = depthwise_bn_relu6(48, 48);
  ConvProblem depthwise = problem_of(dwd);
  depthwise.channels_last = true;
  ConvConfig dw = enumerate_conv_configs(depthwise, 1).ranked.at(0);
  ASSERT_TRUE(dw.direct && dw.channels_last) << dw.summary();
  const std::string text = generate_conv_kernel(dw).text;
  EXPECT_NE(text.find("conv_depthwise_vectors<<<"), std::string::npos);
  expect_kernel_compiles(dw.arch, text, "sm90_fp32_conv2d_depthwise_channels_last", dw.summary());
}

#include <filesystem>
#include <fstream>

#include "realize/families/gemm/gemm_codegen.h"
#include "realize/kernel_abi_header.h"
#include "torch_headers_check.h"

TEST(ConvFamily, OpWrapperParsesAgainstTorchHeaders) {
  const std::string torch_dir = torch_package_dir();
  if (torch_dir.empty()) GTEST_SKIP() << "no torch headers in " << fact::python_exe();
  GraphDoc grown = conv_relu_bias();
  ConvConfig with_vector = enumerate_conv_configs(problem_of(grown), 1).ranked.at(0);
  GraphDoc depthwise = depthwise_bn_relu6();
  ConvConfig direct = enumerate_conv_configs(problem_of(depthwise), 1).ranked.at(0);
  GraphDoc plain;
  plain.input("w", {64, 32, 5}, "float32", "parameter").input("x", {2, 32, 100});
  plain.op("conv1d", "aten.conv1d.default", {ref_to("x"), ref_to("w")}, {2, 64, 96});
  plain.output("conv1d");
  ConvConfig bare = enumerate_conv_configs(problem_of(plain), 1).ranked.at(0);
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "fact_test_conv_wrapper";
  fs::create_directories(dir);
  std::ofstream(dir / "ops.cpp") << op_library_source({generate_conv_op_wrapper(with_vector).text,
                                                       generate_conv_op_wrapper(bare).text,
                                                       generate_conv_op_wrapper(direct).text})
                                        .text;
  auto r = parse_against_torch(torch_dir, dir / "ops.cpp", kernel_abi_include_dir());
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 4000);
}

// A chain of convolutions is tuned as the composer will hand it over: the second conv (fed by the first through ReLU
// and avg-pooling, ops that keep channels-last order) gets the channels-last problem, a new tuning key; the first
// (fed by the module's input) keeps the module's layout and the key it always had; a grouped conv stays channels-first.
TEST(ConvFamily, AConvFedByAnotherIsTunedChannelsLast) {
  GraphDoc d;
  d.input("w1", {32, 16, 3, 3}, "float32", "parameter").input("w2", {32, 32, 3, 3}, "float32", "parameter");
  d.input("x", {4, 16, 18, 18});
  d.op("conv1", "aten.conv2d.default", {ref_to("x"), ref_to("w1")}, {4, 32, 16, 16});
  d.op("relu", "aten.relu.default", {ref_to("conv1")}, {4, 32, 16, 16});
  d.op("pool", "aten.avg_pool2d.default", {ref_to("relu"), Json::array({2, 2})}, {4, 32, 8, 8});
  d.op("conv2", "aten.conv2d.default", {ref_to("pool"), ref_to("w2")}, {4, 32, 6, 6});
  d.output("conv2");
  Plan p = plan_of(d);
  std::vector<size_t> convs;
  for (size_t i = 0; i < p.entries.size(); ++i)
    if (p.entries[i].match.family == "conv") convs.push_back(i);
  ASSERT_EQ(convs.size(), 2u);
  auto reading = [&](const std::string& input) {  // the conv whose x is `input`
    for (size_t i : convs)
      if (bound_node(p.entries[i].match, p.graph, p.entries[i].match.kernel["operands"]["x"])->name == input) return i;
    throw Error("no conv reads " + input);
  };
  auto every = [](size_t) { return true; };
  EXPECT_FALSE(discover::fed_by_own_family(p, reading("x"), every)) << "the module's input";
  EXPECT_TRUE(discover::fed_by_own_family(p, reading("pool"), every)) << "conv1's value through relu and avg_pool2d";
  // The pool alone between the convs is no generated kernel (one with ops after it would be).
  EXPECT_TRUE(std::any_of(p.notes.begin(), p.notes.end(), [](const std::string& n) {
    return n.find("pool left to PyTorch: a pool alone between two convolutions") != std::string::npos;
  })) << fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_FALSE(discover::fed_by_own_family(p, reading("pool"), [&](size_t i) { return i == reading("pool"); }))
      << "a producer that does not write channels-last (a grouped conv's direct kernel) starts no chain";

  // A pattern that does not chain between two convs (a depthwise conv's direct kernel, which writes PyTorch's order)
  // ends the chain: the walk does not pass through the ops it covers (here its ReLU and its own conv2d, both
  // order-keeping, back to conv1) - MobileNetV2's project convs after their depthwise ones.
  GraphDoc s;
  s.input("w1", {32, 16, 3, 3}, "float32", "parameter").input("wd", {32, 1, 3, 3}, "float32", "parameter");
  s.input("w2", {32, 32, 1, 1}, "float32", "parameter").input("x", {4, 16, 18, 18});
  s.op("conv1", "aten.conv2d.default", {ref_to("x"), ref_to("w1")}, {4, 32, 16, 16});
  s.op("dw", "aten.conv2d.default", {ref_to("conv1"), ref_to("wd"), nullptr, Json::array({1, 1}), Json::array({1, 1}),
                                     Json::array({1, 1}), 32}, {4, 32, 16, 16});
  s.op("relu", "aten.relu.default", {ref_to("dw")}, {4, 32, 16, 16});
  s.op("conv2", "aten.conv2d.default", {ref_to("relu"), ref_to("w2")}, {4, 32, 16, 16});
  s.output("conv2");
  Plan q = plan_of(s);
  auto reading_in = [&](const std::string& input) {
    for (size_t i = 0; i < q.entries.size(); ++i) {
      const Match& m = q.entries[i].match;
      if (m.family == "conv" && bound_node(m, q.graph, m.kernel["operands"]["x"])->name == input) return i;
    }
    throw Error("no conv reads " + input);
  };
  size_t const depthwise = reading_in("conv1"), last = reading_in("relu");
  auto not_depthwise = [&](size_t i) { return i != depthwise; };
  EXPECT_FALSE(discover::fed_by_own_family(q, last, not_depthwise));
  EXPECT_TRUE(discover::fed_by_own_family(q, last, every)) << "the same walk, the depthwise conv counted as chaining";

  const KernelFamily& family = *kernel_family_named("conv");
  Json first = conv_problem_from_match(p.entries[reading("x")].match, p.graph, Numerics::tf32, Arch::sm90).to_json();
  Json chained = family.in_channels_last_chain(first);
  EXPECT_FALSE(first.contains("channels_last")) << "a channels-first problem's JSON, and so its key, is unchanged";
  EXPECT_EQ(chained.value("channels_last", false), true);
  EXPECT_NE(family.workload_key("conv", first).canonical(), family.workload_key("conv", chained).canonical());
  EXPECT_EQ(family.measure_problem(chained).value("channels_last", false), true) << "the Python case reads it";

  // A grouped convolution in a chain is tuned channels-last too, by the direct kernel of an element a thread (so
  // MobileNet's depthwise convs keep their 1x1 neighbours channels-last); off a chain, by the plane-staging one.
  ConvProblem grouped = ConvProblem::from_json(first);
  grouped.groups = 16;
  grouped.k = 32;
  Json grouped_chained = family.in_channels_last_chain(grouped.to_json());
  EXPECT_EQ(grouped_chained.value("channels_last", false), true);
  ConvProblem gc = ConvProblem::from_json(grouped_chained);
  auto space = enumerate_conv_configs(gc, 1000).ranked;
  ASSERT_EQ(space.size(), 1u) << "one kernel: no tile to tune";
  const ConvConfig& elements = space.front();
  EXPECT_TRUE(elements.direct && elements.channels_last) << elements.summary();
  EXPECT_TRUE(has(elements.summary(), "direct channels-last")) << elements.summary();
  EXPECT_FALSE(elements.to_json().contains("tile_w"));
  EXPECT_EQ(ConvConfig::from_json(elements.to_json()).id(), elements.id());
  ChannelsLast layout = family.channels_last(grouped_chained, elements.to_json());
  EXPECT_EQ(layout.reads, (std::vector<std::string>{"x", "residual"}));
  EXPECT_TRUE(layout.writes);
  for (const auto& k : enumerate_conv_configs(grouped, 1000).ranked) EXPECT_FALSE(k.channels_last) << k.summary();
  EXPECT_TRUE(has(conv_config_rejection(grouped, elements), "tuned on the module's channels-first tensors"));
  std::string kernel = generate_conv_kernel(elements).text;
  EXPECT_TRUE(has(kernel, "constexpr bool kChannelsLast = true;"));
  EXPECT_TRUE(has(kernel, "conv_direct_elements<<<grid, kElementThreads, 0"));
  EXPECT_TRUE(has(kernel, "x_last ? (image * g.in_pixels + pixel) * a.c + c : (image * a.c + c) * g.in_pixels + pixel"));
  EXPECT_TRUE(has(kernel, "out[out_last ? last : first] = static_cast<Element>("));
  EXPECT_FALSE(has(kernel, "{{")) << "every slot filled";
  std::string op = generate_conv_op_wrapper(elements).text;
  EXPECT_TRUE(has(op, "any_layout = true;"));
  EXPECT_TRUE(has(op, "if (any_layout && (!implicit || padded_c == a.c) && "))
      << "a direct kernel reads a channels-last x of any channel count in place";
  EXPECT_TRUE(has(op, "_empty(sizes, x.options(), true && channels_last && !0);")) << "the meta impl agrees";
}

// A ReLU'd convolution of x [n, c, size, size] by a k x c x filter x filter weight (stride 1, "same" padding).
GraphDoc conv_relu_square(int64_t n, int64_t c, int64_t k, int64_t size, int64_t filter) {
  GraphDoc d;
  const std::vector<int64_t> out = {n, k, size, size};
  d.input("w", {k, c, filter, filter}, "float32", "parameter").input("x", {n, c, size, size});
  d.op("conv2d", "aten.conv2d.default", {ref_to("x"), ref_to("w"), nullptr, Json::array({1, 1}),
                                         Json::array({filter / 2, filter / 2}), Json::array({1, 1}), 1}, out);
  d.op("relu", "aten.relu.default", {ref_to("conv2d")}, out);
  d.output("relu");
  return d;
}

// MobileNetV2's projections to 24 or 32 channels: a 64-wide tile computes over half of its columns as padding, so a
// 32-wide one ranks first there; 128 channels keep the wider tiles.
TEST(ConvFamily, NarrowOutputChannelsTakeTilesOf32) {
  GraphDoc narrow = conv_relu_square(32, 144, 24, 56, 1);
  const ConvConfig top = enumerate_conv_configs(problem_of(narrow), 1).ranked.at(0);
  EXPECT_EQ(top.tile_n, 32) << top.summary();
  GraphDoc wide = conv_relu_square(32, 144, 128, 56, 1);
  EXPECT_GE(enumerate_conv_configs(problem_of(wide), 1).ranked.at(0).tile_n, 64);
}

// KernelBench level2/4's shape (64 channels of 256x256 images -> 128, 3x3) after a costly activation: ping-pong
// configs (two one-warpgroup consumers taking tiles in turn, each epilogue under the other's MMAs) take the ranking's
// third turn, on tiles one warpgroup holds; they need one CTA a SM and unsplit tiles, and leave other configs' ids
// alone.
TEST(ConvFamily, PingPongWarpgroupsTakeTheThirdTurn) {
  GraphDoc d = conv_relu_square(64, 64, 128, 256, 3);
  ConvProblem p = problem_of(d);
  auto top = enumerate_conv_configs(p, 3).ranked;
  ASSERT_EQ(top.size(), 3u);
  EXPECT_FALSE(top[0].pingpong || top[1].pingpong) << top[0].summary() << " / " << top[1].summary();
  const ConvConfig pp = top[2];
  ASSERT_TRUE(pp.pingpong && pp.consumer_warpgroups == 2 && pp.ctas_per_sm == 1 && pp.splits == 1) << pp.summary();
  EXPECT_LE(pp.tile_m * pp.tile_n / 128, 128) << "one warpgroup holds a tile's accumulators";
  EXPECT_TRUE(has(pp.summary(), " 2wg pingpong")) << pp.summary();
  EXPECT_EQ(pp.to_json().at("pingpong"), true);
  EXPECT_EQ(ConvConfig::from_json(pp.to_json()).id(), pp.id());
  EXPECT_FALSE(top[0].to_json().contains("pingpong")) << "written only when set: other configs keep their ids";
  ConvConfig bad = pp;
  bad.ctas_per_sm = 2;
  EXPECT_TRUE(has(conv_config_rejection(p, bad), "ping-pong takes two consumer warpgroups, one CTA a SM"));
  bad = pp;
  bad.consumer_warpgroups = 1;
  EXPECT_TRUE(has(conv_config_rejection(p, bad), "ping-pong takes"));
  bad = pp;
  bad.tile_m = 128;
  bad.tile_n = 256;
  EXPECT_TRUE(has(conv_config_rejection(p, bad), "256 accumulators")) << conv_config_rejection(p, bad);
  // ResNet's layer4 at batch 32 (1568 pixels): 52 tiles of 128x128 are too few for two a SM (narrower tiles not).
  GraphDoc small = conv_relu_square(32, 512, 512, 7, 3);
  ConvProblem sp = problem_of(small);
  for (const auto& k : enumerate_conv_configs(sp, 1000).ranked)
    EXPECT_FALSE(k.pingpong && k.tile_m * k.tile_n >= 128 * 128) << k.summary();
  ConvConfig few = pp;
  few.tile_k = enumerate_conv_configs(sp, 1).ranked.at(0).tile_k;
  EXPECT_TRUE(has(conv_config_rejection(sp, few), "ping-pong where each SM has two tiles at least"))
      << conv_config_rejection(sp, few);
  std::string kernel = generate_conv_kernel(pp).text;
  EXPECT_TRUE(has(kernel, "constexpr bool kPingPong = true;"));
  EXPECT_TRUE(has(kernel, "constexpr int kMmaWarpGroups = kPingPong ? 1 : kConsumerWarpGroups;"));
  EXPECT_TRUE(has(kernel, "if constexpr (PingPong) math_order.wait();"));
  ConvConfig one = pp;  // each warpgroup's epilogue stages 64-row subtiles, as one warpgroup's does
  one.pingpong = false;
  one.consumer_warpgroups = 1;
  EXPECT_EQ(conv_epilogue_smem_bytes(pp), conv_epilogue_smem_bytes(one));
}

// ResNet-50's layer4 at batch 32: 1568 output pixels of 2048 -> 512 channels make 52 128x128 tiles for 264 resident
// CTAs, each a K loop of 64 steps; split-K runs them as units of part of the loop, reduced by the last. Layer1's 56x56
// images (784 tiles) have CTAs enough and never split.
TEST(ConvFamily, FewTilesOfLongKLoopsSplitK) {
  GraphDoc deep = conv_relu_square(32, 2048, 512, 7, 1);
  ConvProblem p = problem_of(deep);
  auto space = enumerate_conv_configs(p, 1000).ranked;
  ASSERT_FALSE(space.empty());
  const ConvConfig& top = space.front();
  EXPECT_GT(top.splits, 1) << top.summary();
  EXPECT_TRUE(has(top.summary(), fmt::format(" splitk{}", top.splits)));
  EXPECT_EQ(top.to_json().at("splits"), top.splits);
  EXPECT_EQ(ConvConfig::from_json(top.to_json()).id(), top.id());
  for (const auto& k : space)
    if (k.splits == 1) EXPECT_FALSE(k.to_json().contains("splits")) << "written only when set: unsplit ids unchanged";
  EXPECT_TRUE(std::any_of(space.begin(), space.end(), [](const ConvConfig& k) { return k.splits == 1; }));
  std::string kernel = generate_conv_kernel(top).text;
  EXPECT_TRUE(has(kernel, fmt::format("constexpr int kSplits = {};", top.splits)));
  EXPECT_TRUE(has(kernel, "fact_conv::PersistentConv<UniversalKernel, kCtasPerSm, kSplits, kPingPong, kGroup>"));
  EXPECT_TRUE(has(kernel, "constexpr int kGroup = kSplits > 1 || kReduce ? 1 : " + std::to_string(kConvPhaseGroup) + ";"))
      << "split kernels run a phase a launch";
  EXPECT_TRUE(has(kernel, "if (k_tiles < kSplits) return FACT_ERR_SHAPE;")) << "each split needs a K tile";
  EXPECT_TRUE(has(kernel, "ConvKernel::reset_arrivals(p.params[i], stream) != cudaSuccess"))
      << "the arrival counts are zeroed before every launch";
  EXPECT_TRUE(has(kernel, "Barrier::wait_eq(params.arrivals, mma_thread_idx, int(tile), Splits - 1);"));

  GraphDoc wide = conv_relu_square(32, 64, 256, 56, 1);
  ConvProblem wp = problem_of(wide);
  for (const auto& k : enumerate_conv_configs(wp, 1000).ranked) EXPECT_EQ(k.splits, 1) << k.summary();
  ConvConfig split = enumerate_conv_configs(wp, 1).ranked.at(0);
  split.splits = 2;
  EXPECT_TRUE(has(conv_config_rejection(wp, split), "fewer than the CTAs resident at once")) << conv_config_rejection(wp, split);
  // Layer3's 1x1 of 64 -> 256 channels at 7x7 (fewer tiles) has 2 K tiles of 32: no third split; nor does a
  // transposed convolution split.
  GraphDoc short_k = conv_relu_square(32, 64, 256, 7, 1);
  ConvProblem sp = problem_of(short_k);
  ConvConfig three = enumerate_conv_configs(sp, 1).ranked.at(0);
  three.splits = 3;
  EXPECT_TRUE(has(conv_config_rejection(sp, three), "3 splits of a K loop of 2 K tiles")) << conv_config_rejection(sp, three);
  three.splits = 2;
  EXPECT_EQ(conv_config_rejection(sp, three), "");
  ConvProblem transposed = sp;
  transposed.transposed = true;
  EXPECT_TRUE(has(conv_config_rejection(transposed, three), "forward convolution only"));
}
