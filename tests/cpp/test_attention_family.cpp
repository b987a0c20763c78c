// The attention family: sdpa_attention(_manual) matches -> AttentionProblem on the MiniGPT and Llama
// blocks (strides of the module's views, GQA, causal, scale), the config space of its three kernels
// (sm80_mma everywhere, sm90_wgmma and sm90_tma_ws on sm90 in bf16/fp16), generation against a stand-in with the
// real templates' slot set (tests/cpp/data) and from the real templates, op wrappers, and nvcc compiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <tuple>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "core/process.h"
#include "core/arch_spec.h"
#include "discover/matcher.h"
#include "discover/pattern_registry.h"
#include "family_nvcc_check.h"
#include "ir/ir_io.h"
#include "realize/families/attention/family.h"
#include "realize/family_tuner.h"
#include "realize/kernel_family.h"
#include "realize/nvcc_command.h"

namespace fs = std::filesystem;
using namespace fact;
using namespace fact::realize;
using fact::discover::Match;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct Traced {
  fact::ir::Graph graph;
  std::vector<Match> matches;
  const Match& rule(const std::string& name) const {
    for (const auto& m : matches)
      if (m.rule == name) return m;
    throw fact::Error("no match of " + name);
  }
};

Traced traced(const std::string& fixture) {
  Traced t{fact::ir::load_graph(std::string(FACT_TEST_DATA) + "/ir/" + fixture, fact::ir::OpTable::builtin()), {}};
  auto all = fact::discover::find_all_matches(t.graph, fact::discover::PatternRegistry::builtin(),
                                              fact::ir::OpTable::builtin(), fact::ArchSpec::builtin("sm90"));
  t.matches = fact::discover::resolve_overlaps(all, [](const Match& m) { return static_cast<double>(m.nodes.size()); });
  return t;
}

std::string standin() {
  return fact::read_text_file(std::string(FACT_TEST_DATA) + "/attention_fwd_standin.cu.in", "stand-in template");
}

}  // namespace

TEST(AttentionProblem, MiniGptManualAttentionReadsTheQkvSplitInPlace) {
  auto t = traced("minigpt_block.json");
  const Match& m = t.rule("sdpa_attention_manual");
  EXPECT_EQ(kernel_family_for(m), kernel_family_named("attention"));
  AttentionProblem p = attention_problem_from_match(m, t.graph, Numerics::tf32, Arch::sm90);
  EXPECT_EQ(p.batch, 128);
  EXPECT_EQ(p.heads, 8);
  EXPECT_EQ(p.heads_kv, 8);
  EXPECT_EQ(p.seq_q, 512);
  EXPECT_EQ(p.seq_k, 512);
  EXPECT_EQ(p.head_dim, 96);
  EXPECT_TRUE(p.causal);
  EXPECT_NEAR(p.scale, 1.0 / std::sqrt(96.0), 1e-12);
  const HeadStrides qkv{512 * 2304, 96, 2304};  // q = c_attn(x).split(768)[0].view(B,T,H,D).transpose(1,2)
  EXPECT_EQ(p.q, qkv);
  EXPECT_EQ(p.k, qkv);
  EXPECT_EQ(p.v, qkv);
  EXPECT_EQ(p.o(), (HeadStrides{512 * 768, 96, 768}));  // [B, T, H, D]: y.transpose(1, 2) is contiguous
  EXPECT_EQ(p.element, Element::f32);
  EXPECT_EQ(AttentionProblem::from_json(p.to_json()).to_json(), p.to_json());
  EXPECT_EQ(attention_problem_from_match(m, t.graph, Numerics::bf16, Arch::sm80).element, Element::bf16);
  // fp32 accuracy comes from the kernel's 3xTF32 mode, on fp32 tensors.
  auto accurate = attention_problem_from_match(m, t.graph, Numerics::fp32, Arch::sm90);
  EXPECT_EQ(accurate.numerics, Numerics::x3tf32);
  EXPECT_EQ(accurate.element, Element::f32);
}

TEST(AttentionProblem, LlamaSdpaIsGroupedQueryCausalWithDefaultScale) {
  auto t = traced("llama3_block.json");
  AttentionProblem p = attention_problem_from_match(t.rule("sdpa_attention"), t.graph, Numerics::bf16, Arch::sm90);
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.heads, 32);
  EXPECT_EQ(p.heads_kv, 8);
  EXPECT_EQ(p.seq_q, 2048);
  EXPECT_EQ(p.head_dim, 128);
  EXPECT_TRUE(p.causal);
  EXPECT_NEAR(p.scale, 1.0 / std::sqrt(128.0), 1e-12);
  // v = v_proj(x).view(B, T, Hkv, D).transpose(1, 2); k after RoPE keeps that layout (elementwise ops
  // preserve their input's strides), so both are read in place from [B, T, Hkv, D] storage.
  const HeadStrides bthd{2048 * 8 * 128, 128, 8 * 128};
  EXPECT_EQ(p.k, bthd);
  EXPECT_EQ(p.v, bthd);
}

// bench/models/hf_bert.py with one layer: transformers' SDPA attention with the padding mask it builds, bool
// [batch, 1, seq, seq].
TEST(AttentionProblem, BertSdpaReadsItsPaddingMaskBroadcastOverHeads) {
  auto t = traced("hf_bert_layer.json");
  const Match& m = t.rule("sdpa_attention");
  AttentionProblem p = attention_problem_from_match(m, t.graph, Numerics::fp32, Arch::sm90);
  EXPECT_EQ(p.batch, 32);
  EXPECT_EQ(p.heads, 12);
  EXPECT_EQ(p.seq_q, 256);
  EXPECT_EQ(p.head_dim, 64);
  EXPECT_FALSE(p.causal);
  EXPECT_DOUBLE_EQ(p.scale, 0.125);
  EXPECT_EQ(p.mask, AttentionMask::boolean);
  EXPECT_EQ(p.mask_strides, (HeadStrides{256 * 256, 0, 256}));  // one mask for every head
  auto j = p.to_json();
  EXPECT_EQ(j.at("mask"), "bool");
  EXPECT_EQ(AttentionProblem::from_json(j).to_json(), j);
  // Records written before masks have no mask fields, and a problem without a mask writes none.
  j.erase("mask");
  j.erase("mask_strides");
  EXPECT_EQ(AttentionProblem::from_json(j).mask, AttentionMask::none);
  EXPECT_EQ(AttentionProblem::from_json(j).to_json(), j);
  // The op call hands the mask to the op; every kernel of the space takes it.
  EXPECT_FALSE(enumerate_attention_configs(p, 100).ranked.empty());
}

TEST(AttentionProblem, AMaskThatCannotBroadcastOrIsNotBoolOrFloatingStaysPyTorchs) {
  auto doc = nlohmann::json::parse(fact::read_text_file(std::string(FACT_TEST_DATA) + "/ir/hf_bert_layer.json", "ir"));
  auto with_mask = [&](const std::string& dtype, std::vector<int64_t> shape, std::vector<int64_t> strides) {
    auto d = doc;
    for (auto& n : d["nodes"])
      if (n["name"] == "expand_2") n["outputs"][0] = {{"shape", shape}, {"strides", strides}, {"dtype", dtype}};
    auto g = fact::ir::parse_graph(d, "bert with another mask", fact::ir::OpTable::builtin());
    auto ms = fact::discover::find_all_matches(g, fact::discover::PatternRegistry::builtin(),
                                               fact::ir::OpTable::builtin(), fact::ArchSpec::builtin("sm90"));
    for (const auto& m : ms)
      if (m.rule == "sdpa_attention") return attention_problem_from_match(m, g, Numerics::tf32, Arch::sm90);
    throw fact::Error("no sdpa_attention match");
  };
  // An additive [seq, seq] mask (ALiBi-like) broadcasts over batch and heads.
  AttentionProblem alibi = with_mask("float32", {256, 256}, {256, 1});
  EXPECT_EQ(alibi.mask, AttentionMask::additive);
  EXPECT_EQ(alibi.mask_strides, (HeadStrides{0, 0, 256}));
  auto error = [&](const std::string& dtype, std::vector<int64_t> shape, std::vector<int64_t> strides) {
    try {
      with_mask(dtype, shape, strides);
    } catch (const fact::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_TRUE(contains(error("int64", {32, 1, 256, 256}, {65536, 65536, 256, 1}), "bool or floating mask"));
  EXPECT_TRUE(contains(error("bool", {32, 2, 256, 256}, {131072, 65536, 256, 1}), "does not broadcast to 12"));
  EXPECT_TRUE(contains(error("bool", {32, 1, 256, 256}, {65536, 65536, 1, 256}), "keys have stride 256"));
}

TEST(AttentionConfigSpace, FilteredBySharedMemoryAndWarpRows) {
  auto t = traced("minigpt_block.json");
  AttentionProblem p = attention_problem_from_match(t.rule("sdpa_attention_manual"), t.graph, Numerics::tf32, Arch::sm90);
  auto space = enumerate_attention_configs(p, 100);
  EXPECT_EQ(space.enumerated, 12 + 4) << "sm80_mma's 2x3x2 axes, decode's 1x2x2 (refused: seq_q 512)";
  for (const auto& c : space.ranked) {
    EXPECT_EQ(attention_config_rejection(p, c), "") << c.summary();
    EXPECT_GE(c.block_m / c.warps, 16) << c.summary();
    EXPECT_EQ(AttentionConfig::from_json(c.to_json()).id(), c.id());
  }
  AttentionConfig big;
  big.arch = Arch::sm90; big.element = Element::f32; big.numerics = Numerics::tf32; big.head_dim = 96;
  big.block_m = 128; big.block_n = 128; big.warps = 8;
  EXPECT_TRUE(contains(attention_config_rejection(p, big), "shared memory"));
  p.head_dim = 72;  // no kernel lists it
  EXPECT_THROW(enumerate_attention_configs(p, 8), fact::Error);
}

// The persistent TMA kernel keeps two Q tiles (the next tile's Q loads while O is stored through this one's), so a
// tile that fits the one-Q kernels can exceed its shared memory: d128, 128 x 176 in bf16 needs 1 x 32 KB of Q plus
// 2 x 2 x 44 KB of K and V (~209 KB) in sm90_wgmma, 2 x 32 KB + 176 KB (~241 KB) in sm90_tma_ws.
TEST(AttentionConfigSpace, TmaKernelCountsItsTwoQTiles) {
  auto t = traced("minigpt_block.json");
  AttentionProblem p = attention_problem_from_match(t.rule("sdpa_attention_manual"), t.graph, Numerics::bf16, Arch::sm90);
  p.head_dim = 128;
  AttentionConfig c;
  c.arch = Arch::sm90; c.element = Element::bf16; c.numerics = Numerics::bf16; c.head_dim = 128;
  c.block_m = 128; c.block_n = 176; c.warps = 8;
  c.kernel = AttentionKernel::sm90_wgmma;
  EXPECT_EQ(attention_config_rejection(p, c), "");
  c.kernel = AttentionKernel::sm90_tma_ws;
  EXPECT_TRUE(contains(attention_config_rejection(p, c), "shared memory")) << attention_config_rejection(p, c);
  c.block_n = 128;
  EXPECT_EQ(attention_config_rejection(p, c), "");
}

// A decode step (one query row against a KV cache; Llama-3's GQA shape with seq_q 1, no causal mask) takes the split-KV
// kernel first, in every mode; a query block past limits.max_seq_q or a head dim it has no lanes for is refused it.
TEST(AttentionConfigSpace, ADecodeStepTakesTheSplitKvKernelFirst) {
  auto t = traced("llama3_block.json");
  for (Numerics n : {Numerics::bf16, Numerics::tf32, Numerics::x3tf32}) {
    AttentionProblem p = attention_problem_from_match(t.rule("sdpa_attention"), t.graph, n, Arch::sm90);
    p.seq_q = 1;
    p.causal = false;
    auto three = enumerate_attention_configs(p, 3).ranked;
    ASSERT_FALSE(three.empty());
    EXPECT_EQ(three[0].kernel, AttentionKernel::decode) << to_string(n);
    EXPECT_EQ(three[0].template_name(), "cute/attention_decode.cu.in");
    EXPECT_EQ(three[0].block_m, 1);
    EXPECT_TRUE(contains(three[0].summary(), "decode")) << three[0].summary();
    AttentionConfig c = three[0];
    EXPECT_EQ(attention_config_rejection(p, c), "");
    p.seq_q = 17;
    EXPECT_TRUE(contains(attention_config_rejection(p, c), "at most 16 rows")) << attention_config_rejection(p, c);
    p.seq_q = 1;
    c.head_dim = p.head_dim = 80;
    EXPECT_TRUE(contains(attention_config_rejection(p, c), "head dim 80")) << attention_config_rejection(p, c);
  }
}

TEST(AttentionConfigSpace, WgmmaKernelsOnlyOnSm90In16BitModes) {
  auto t = traced("minigpt_block.json");
  auto space_of = [&](Numerics n, Arch a) {
    return enumerate_attention_configs(attention_problem_from_match(t.rule("sdpa_attention_manual"), t.graph, n, a), 100);
  };
  auto count = [](const ConfigSpace<AttentionConfig>& s, AttentionKernel k) {
    return std::count_if(s.ranked.begin(), s.ranked.end(), [&](const AttentionConfig& c) { return c.kernel == k; });
  };
  for (Numerics n : {Numerics::bf16, Numerics::fp16}) {
    auto s90 = space_of(n, Arch::sm90);
    // sm80_mma's 2x3x2 axes, sm90_wgmma's 2x2x2, sm90_tma_ws's 2x2x2 x 2 schedules, decode's 1x2x2.
    EXPECT_EQ(s90.enumerated, 12 + 8 + 16 + 4) << to_string(n);
    EXPECT_EQ(count(s90, AttentionKernel::decode), 0) << "MiniGPT's 512 query rows are no decode step";
    // 64 query rows per (consumer) warpgroup: (64, 4 warps) and (128, 8 warps), each with block_n 64 and 128; the
    // TMA kernel's two warpgroups of (128, 8 warps) also ping-pong.
    EXPECT_EQ(count(s90, AttentionKernel::sm90_tma_ws), 6) << to_string(n);
    EXPECT_EQ(count(s90, AttentionKernel::sm90_wgmma), 4) << to_string(n);
    EXPECT_GT(count(s90, AttentionKernel::sm80_mma), 0) << to_string(n);
    for (const auto& c : s90.ranked) {
      if (c.kernel == AttentionKernel::sm80_mma) continue;
      bool ws = c.kernel == AttentionKernel::sm90_tma_ws;
      EXPECT_EQ(c.block_m, 16 * c.warps) << c.summary();
      if (c.schedule == AttentionSchedule::pingpong) EXPECT_TRUE(ws && c.warps == 8) << c.summary();
      EXPECT_EQ(c.template_name(), ws ? "cute/attention_fwd_sm90_ws.cu.in" : "cute/attention_fwd_sm90.cu.in");
      EXPECT_TRUE(contains(c.summary(), ws ? "sm90_tma_ws" : "sm90_wgmma")) << c.summary();
    }
    // A short --top still measures every kernel: their candidates alternate in the data's order.
    AttentionProblem p = attention_problem_from_match(t.rule("sdpa_attention_manual"), t.graph, n, Arch::sm90);
    auto three = enumerate_attention_configs(p, 3).ranked;
    ASSERT_EQ(three.size(), 3u);
    EXPECT_EQ(three[0].kernel, AttentionKernel::sm90_tma_ws);
    EXPECT_EQ(three[1].kernel, AttentionKernel::sm90_wgmma);
    EXPECT_EQ(three[2].kernel, AttentionKernel::sm80_mma);
    auto s80 = space_of(n, Arch::sm80);
    EXPECT_EQ(count(s80, AttentionKernel::sm90_wgmma), 0) << to_string(n);
    EXPECT_EQ(count(s80, AttentionKernel::sm90_tma_ws), 0) << to_string(n);
    EXPECT_EQ(s80.enumerated, 12 + 4) << to_string(n);
  }
  for (Numerics n : {Numerics::tf32, Numerics::fp32}) {
    EXPECT_EQ(count(space_of(n, Arch::sm90), AttentionKernel::sm90_wgmma), 0) << to_string(n);
    EXPECT_EQ(count(space_of(n, Arch::sm90), AttentionKernel::sm90_tma_ws), 0) << to_string(n);
  }

  // The rejection names the reason; the two kernels of one shape are different configs.
  AttentionProblem p = attention_problem_from_match(t.rule("sdpa_attention_manual"), t.graph, Numerics::bf16, Arch::sm90);
  AttentionConfig c;
  c.kernel = AttentionKernel::sm90_wgmma; c.arch = Arch::sm90; c.element = Element::bf16; c.numerics = Numerics::bf16;
  c.head_dim = 96; c.block_m = 128; c.block_n = 128; c.warps = 8;
  EXPECT_EQ(attention_config_rejection(p, c), "");
  AttentionConfig mma = c;
  mma.kernel = AttentionKernel::sm80_mma;
  EXPECT_NE(mma.id(), c.id());
  AttentionConfig ws = c;
  ws.kernel = AttentionKernel::sm90_tma_ws;
  EXPECT_NE(ws.id(), c.id());
  EXPECT_EQ(attention_config_rejection(p, ws), "");
  EXPECT_EQ(AttentionConfig::from_json(ws.to_json()).kernel, AttentionKernel::sm90_tma_ws);
  // Ping-pong: the TMA kernel's alone, with two consumer warpgroups; a config of its own, in the JSON only then.
  AttentionConfig pp = ws;
  pp.schedule = AttentionSchedule::pingpong;
  EXPECT_EQ(attention_config_rejection(p, pp), "");
  EXPECT_NE(pp.id(), ws.id());
  EXPECT_FALSE(ws.to_json().contains("schedule"));
  EXPECT_EQ(pp.to_json().at("schedule"), "pingpong");
  EXPECT_EQ(AttentionConfig::from_json(pp.to_json()).id(), pp.id());
  EXPECT_TRUE(contains(pp.summary(), "sm90_tma_ws pingpong")) << pp.summary();
  AttentionConfig one_group = pp;
  one_group.block_m = 64; one_group.warps = 4;
  EXPECT_TRUE(contains(attention_config_rejection(p, one_group), "two consumer warpgroups"))
      << attention_config_rejection(p, one_group);
  AttentionConfig wgmma_pp = c;
  wgmma_pp.schedule = AttentionSchedule::pingpong;
  EXPECT_TRUE(contains(attention_config_rejection(p, wgmma_pp), "has no pingpong schedule"))
      << attention_config_rejection(p, wgmma_pp);
  auto bad_schedule = pp.to_json();
  bad_schedule["schedule"] = "round_robin";
  EXPECT_THROW(AttentionConfig::from_json(bad_schedule), fact::Error);
  AttentionConfig rows = c;
  rows.warps = 4;  // 32 rows per warp: not one warpgroup GMMA per 64 rows
  EXPECT_TRUE(contains(attention_config_rejection(p, rows), "row count per warp")) << attention_config_rejection(p, rows);
  AttentionProblem p80 = p;
  p80.arch = Arch::sm80;
  AttentionConfig on80 = c;
  on80.arch = Arch::sm80;
  EXPECT_TRUE(contains(attention_config_rejection(p80, on80), "does not run on sm80"));
  on80.kernel = AttentionKernel::sm90_tma_ws;
  EXPECT_TRUE(contains(attention_config_rejection(p80, on80), "does not run on sm80"));
  AttentionProblem p32 = p;
  p32.head_dim = 32;
  AttentionConfig d32 = c;
  d32.head_dim = 32;
  EXPECT_TRUE(contains(attention_config_rejection(p32, d32), "head dim 32"));
  EXPECT_EQ(attention_config_rejection(p32, [&] { auto m = d32; m.kernel = AttentionKernel::sm80_mma; return m; }()), "");

  // JSON round trip; a record from before the kernel axis is the mma.sync kernel's.
  EXPECT_EQ(AttentionConfig::from_json(c.to_json()).id(), c.id());
  auto old = mma.to_json();
  old.erase("kernel");
  EXPECT_EQ(AttentionConfig::from_json(old).kernel, AttentionKernel::sm80_mma);
  auto bad = c.to_json();
  bad["kernel"] = "sm100_tcgen05";
  EXPECT_THROW(AttentionConfig::from_json(bad), fact::Error);
}

TEST(AttentionCodegen, StandInWithTheRealSlotSetRendersAndExportsTheAbi) {
  AttentionConfig c;
  c.arch = Arch::sm90; c.element = Element::bf16; c.numerics = Numerics::bf16; c.head_dim = 96;
  auto src = render_attention_kernel(c, standin(), "attention_fwd_standin.cu.in");
  EXPECT_FALSE(contains(src.text, "{{"));
  EXPECT_TRUE(contains(src.text, "using Element = cutlass::bfloat16_t;"));
  EXPECT_TRUE(contains(src.text, "constexpr int kHeadDim = 96;"));
  EXPECT_TRUE(contains(src.text, "int fact_" + c.id() + "_run(const FactAttentionArgs* a)"));
  EXPECT_TRUE(contains(src.text, c.to_json().dump()));
  // The renderer is strict both ways: a template with a slot the family does not fill is an error.
  EXPECT_THROW(render_attention_kernel(c, standin() + "{{stages}}", "t"), fact::Error);
}

TEST(AttentionCodegen, OpWrapperAllocatesBthdAndReturnsTheTransposedView) {
  AttentionConfig c;
  auto w = generate_attention_op_wrapper(c);
  EXPECT_EQ(attention_op_schema(c),
            c.id() + "(Tensor q, Tensor k, Tensor v, Tensor? mask, float scale, bool causal) -> Tensor");
  EXPECT_FALSE(contains(w.text, "{{"));
  EXPECT_TRUE(contains(w.text, "q.size(0), q.size(2), q.size(1), q.size(3)}, q.options()).transpose(1, 2)"));
  EXPECT_TRUE(contains(w.text, "TORCH_LIBRARY_IMPL(fact, Meta, m)"));
}

TEST(AttentionCodegen, RealTemplateRendersEveryConfigOfTheMiniGptSpaceInEveryMode) {
  auto t = traced("minigpt_block.json");
  for (Numerics n : {Numerics::tf32, Numerics::fp32, Numerics::bf16, Numerics::fp16}) {
    AttentionProblem p = attention_problem_from_match(t.rule("sdpa_attention_manual"), t.graph, n, Arch::sm90);
    auto space = enumerate_attention_configs(p, 100);
    ASSERT_FALSE(space.ranked.empty()) << to_string(n);
    for (const auto& c : space.ranked) {
      auto src = generate_attention_kernel(c);
      EXPECT_FALSE(contains(src.text, "{{")) << c.summary();
      EXPECT_TRUE(contains(src.text, "constexpr int kHeadDim = 96;")) << c.summary();
      EXPECT_TRUE(contains(src.text, "constexpr char kNumerics[] = \"" + to_string(p.numerics) + "\";")) << c.summary();
      EXPECT_TRUE(contains(src.text, "int fact_" + c.id() + "_run(const FactAttentionArgs* args)")) << c.summary();
    }
  }
}

TEST(AttentionCodegen, WgmmaKernelsRenderGmmaAtomsWithEverySlotFilled) {
  auto t = traced("minigpt_block.json");
  AttentionProblem p = attention_problem_from_match(t.rule("sdpa_attention_manual"), t.graph, Numerics::fp16, Arch::sm90);
  int rendered = 0, rendered_ws = 0;
  for (const auto& c : enumerate_attention_configs(p, 100).ranked) {
    auto src = generate_attention_kernel(c);
    bool ws = c.kernel == AttentionKernel::sm90_tma_ws;
    bool wgmma = c.kernel == AttentionKernel::sm90_wgmma || ws;
    EXPECT_EQ(src.template_name, ws      ? "cute/attention_fwd_sm90_ws.cu.in"
                                 : wgmma ? "cute/attention_fwd_sm90.cu.in"
                                         : "cute/attention_fwd.cu.in");
    // Only the wgmma kernels hold GMMA atoms, and they hold no mma.sync; only the warp-specialized one loads by
    // TMA, and it has no cp.async.
    EXPECT_EQ(contains(src.text, "GMMA::ss_op_selector<Element, Element, float"), wgmma) << c.summary();
    EXPECT_EQ(contains(src.text, "SM80_16x8x16_F32F16F16F32_TN"), !wgmma) << c.summary();
    EXPECT_EQ(contains(src.text, "make_tma_copy(SM90_TMA_LOAD{}"), ws) << c.summary();
    EXPECT_EQ(contains(src.text, "cp_async_fence"), !ws) << c.summary();
    if (ws) {
      ++rendered_ws;
      EXPECT_TRUE(contains(src.text, "constexpr bool kPingPong = same(\"" + to_string(c.schedule) + "\", \"pingpong\");"))
          << c.summary();
      for (const char* part : {"warpgroup_reg_dealloc<kProducerRegs>", "warpgroup_reg_alloc<kConsumerRegs>",
                               "constexpr int kThreads = kConsumerThreads + 128;", "__grid_constant__ TmaK const tma_k",
                               "arrive_and_expect_tx(&bars.full_k[s], kStageBytes)", "tma_partition(",
                               "#include <cute/atom/copy_traits_sm90_tma.hpp>", "return FACT_ERR_INIT;"})
        EXPECT_TRUE(contains(src.text, part)) << part;
    }
    if (!wgmma) continue;
    ++rendered;
    EXPECT_FALSE(contains(src.text, "{{")) << c.summary();
    for (const char* part : {"GMMA::rs_op_selector<Element, Element, float", "GMMA::Major::MN", "GMMA::Layout_SW128_Atom",
                             "GMMA::Layout_SW64_Atom", "warpgroup_arrive();", "warpgroup_wait<1>();",
                             ws ? "fence_barrier_init" : "fence_view_async_shared",
                             "#include <cute/atom/mma_traits_sm90_gmma.hpp>"})
      EXPECT_TRUE(contains(src.text, part)) << part;
    EXPECT_TRUE(contains(src.text, "// FACT kernel " + c.id() + ": " + c.summary()));
    EXPECT_TRUE(contains(src.text, "namespace fact_" + c.id() + " {"));
    EXPECT_TRUE(contains(src.text, "using Element = cutlass::half_t;"));
    EXPECT_TRUE(contains(src.text, "constexpr char kNumerics[] = \"fp16\";"));
    EXPECT_TRUE(contains(src.text, "constexpr int kHeadDim = 96;"));
    EXPECT_TRUE(contains(src.text, "constexpr int kBlockM = " + std::to_string(c.block_m) + ";"));
    EXPECT_TRUE(contains(src.text, "constexpr int kBlockN = " + std::to_string(c.block_n) + ";"));
    EXPECT_TRUE(contains(src.text, "constexpr int kWarps = " + std::to_string(c.warps) + ";"));
    EXPECT_TRUE(contains(src.text, "int fact_" + c.id() + "_can_implement(const FactAttentionArgs* args)"));
    EXPECT_TRUE(contains(src.text, "int fact_" + c.id() + "_run(const FactAttentionArgs* args)"));
    EXPECT_TRUE(contains(src.text, "R\"FACT_JSON(" + c.to_json().dump() + ")FACT_JSON\""));
  }
  EXPECT_EQ(rendered, 10);
  EXPECT_EQ(rendered_ws, 6);
}

namespace {
// The first candidate of `kernel` for MiniGPT's causal head dim 96, or for Llama-3's causal GQA head dim 128.
void expect_attention_compiles(Numerics n, Arch arch, const std::string& name,
                               AttentionKernel kernel = AttentionKernel::sm80_mma, bool llama = false,
                               AttentionSchedule schedule = AttentionSchedule::cooperative, int head_dim = 0) {
  auto t = traced(llama ? "llama3_block.json" : "minigpt_block.json");
  AttentionProblem p =
      attention_problem_from_match(t.rule(llama ? "sdpa_attention" : "sdpa_attention_manual"), t.graph, n, arch);
  ASSERT_TRUE(p.causal && p.head_dim == (llama ? 128 : 96));
  if (head_dim) p.head_dim = head_dim;  // the kernel's text follows its config's head dim alone
  auto ranked = enumerate_attention_configs(p, 100).ranked;
  auto it = std::find_if(ranked.begin(), ranked.end(),
                         [&](const AttentionConfig& c) { return c.kernel == kernel && c.schedule == schedule; });
  ASSERT_NE(it, ranked.end()) << to_string(kernel);
  const AttentionConfig& c = *it;
  expect_kernel_compiles(c.arch, generate_attention_kernel(c).text, name, c.summary());
}
}  // namespace

// The real kernel, one mode per arch: fp32 in/out with TF32 MMAs on sm_90a, bf16 on sm_80.
TEST(AttentionCodegenNvcc, Sm90aTf32Compiles) { expect_attention_compiles(Numerics::tf32, Arch::sm90, "sm90_tf32_attention"); }
TEST(AttentionCodegenNvcc, Sm80Bf16Compiles) { expect_attention_compiles(Numerics::bf16, Arch::sm80, "sm80_bf16_attention"); }
// The wgmma kernel on MiniGPT's causal head dim 96 in bf16: its layout static_asserts (GMMA descriptors, fragment
// shapes, S's accumulator as P's A operand) only fire in a real sm_90a compile.
TEST(AttentionCodegenNvcc, Sm90aBf16WgmmaCompiles) {
  expect_attention_compiles(Numerics::bf16, Arch::sm90, "sm90_bf16_wgmma_attention", AttentionKernel::sm90_wgmma);
}
// The warp-specialized TMA kernel on Llama-3's causal GQA head dim 128 in bf16: the TMA descriptors' types (built
// from the smem layouts, V's through the V^T tile), the producer/consumer split and the GMMA layouts only
// instantiate in a real sm_90a compile.
TEST(AttentionCodegenNvcc, Sm90aBf16TmaWsCompiles) {
  expect_attention_compiles(Numerics::bf16, Arch::sm90, "sm90_bf16_tma_ws_attention", AttentionKernel::sm90_tma_ws, true);
}
// Head dim 80 (Phi-2's): rows of 160 bytes take the 32-byte swizzle and O's GMMA is 80 wide (one of CuTe's extended
// GMMA shapes, enabled before the first CuTe header: the wgmma kernel includes CuTe's MMA headers first).
TEST(AttentionCodegenNvcc, Sm90aBf16TmaWsHeadDim80Compiles) {
  expect_attention_compiles(Numerics::bf16, Arch::sm90, "sm90_bf16_tma_ws_d80_attention", AttentionKernel::sm90_tma_ws,
                            true, AttentionSchedule::cooperative, 80);
}
TEST(AttentionCodegenNvcc, Sm90aBf16WgmmaHeadDim80Compiles) {
  expect_attention_compiles(Numerics::bf16, Arch::sm90, "sm90_bf16_wgmma_d80_attention", AttentionKernel::sm90_wgmma,
                            true, AttentionSchedule::cooperative, 80);
}
// The decode kernel (split-KV in fp32 FMAs) in bf16 on sm_90a and in fp32 (tf32 mode) on sm_80: a lane's piece of a
// row is one 8- or 16-byte load, the mask's reader is the other kernels'.
TEST(AttentionCodegenNvcc, DecodeCompiles) {
  for (auto [n, arch, name] : {std::tuple{Numerics::bf16, Arch::sm90, "sm90_bf16_decode_attention"},
                               std::tuple{Numerics::tf32, Arch::sm80, "sm80_tf32_decode_attention"}}) {
    AttentionConfig c;
    c.kernel = AttentionKernel::decode;
    c.arch = arch; c.numerics = n; c.element = input_element(n); c.head_dim = 128;
    c.block_m = 1; c.block_n = 256; c.warps = 4;
    expect_kernel_compiles(c.arch, generate_attention_kernel(c).text, name, c.summary());
  }
}
// The same kernel with its two consumer warpgroups taking turns (named barriers around the GMMA issue).
TEST(AttentionCodegenNvcc, Sm90aBf16TmaWsPingPongCompiles) {
  expect_attention_compiles(Numerics::bf16, Arch::sm90, "sm90_bf16_tma_ws_pingpong_attention",
                            AttentionKernel::sm90_tma_ws, true, AttentionSchedule::pingpong);
}
