// The rope family: the rule on the traced Llama blocks (slice and chunk forms of rotate_half) and on near
// misses built here (interleaved pairs, odd head dim, swapped halves, a missing sign, per-batch tables),
// the problem (view strides, broadcast tables, the output layout), the config space, kernel and op-wrapper
// generation for each dtype, the seam's measurement request, and (tests named *Nvcc*) one nvcc compile per
// arch (sm_80 bf16, sm_90a fp32).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>

#include "core/error.h"
#include "core/paths.h"
#include "core/process.h"
#include "core/arch_spec.h"
#include "discover/matcher.h"
#include "discover/pattern_registry.h"
#include "ir/ir_io.h"
#include "family_nvcc_check.h"
#include "ir_test_graphs.h"
#include "realize/family_tuner.h"
#include "realize/kernel_family.h"
#include "realize/nvcc_command.h"
#include "realize/families/rope/family.h"

namespace fs = std::filesystem;
using namespace fact;
using namespace fact::realize;
using fact::discover::Match;
using fact::test::GraphDoc;
using fact::test::ref_to;
using Json = nlohmann::json;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<Match> resolved(const fact::ir::Graph& g) {
  auto all = fact::discover::find_all_matches(g, fact::discover::PatternRegistry::builtin(),
                                              fact::ir::OpTable::builtin(), fact::ArchSpec::builtin("sm90"));
  return fact::discover::resolve_overlaps(all, [](const Match& m) { return static_cast<double>(m.nodes.size()); });
}

fact::ir::Graph fixture(const std::string& name) {
  return fact::ir::load_graph(std::string(FACT_TEST_DATA) + "/ir/" + name, fact::ir::OpTable::builtin());
}

std::vector<const Match*> ropes(const std::vector<Match>& ms) {
  std::vector<const Match*> out;
  for (const auto& m : ms)
    if (m.rule == "rope") out.push_back(&m);
  return out;
}

// x * cos + rotate_half(x) * sin over x [2, 4, 16, d] written out as the tracer records it, with knobs that
// turn it into a near miss.
struct RopeGraph {
  int64_t d = 64;
  bool interleaved = false;   // x[..., 1::2] and x[..., ::2] (GPT-J pairs) instead of the two halves
  bool swapped = false;       // cat(x_lo, -x_hi): the other rotation direction
  bool no_neg = false;        // cat(x_hi, x_lo)
  bool per_batch_table = false;  // cos/sin [2, 1, 16, d]: one table per batch element
  std::string table_dtype = "float32";
};

GraphDoc rope_graph(const RopeGraph& o) {
  constexpr int64_t kMax = 9223372036854775807;
  const int64_t b = 2, h = 4, t = 16, d = o.d, half = d / 2;
  const std::vector<int64_t> x_shape{b, h, t, d};
  const std::string out_dtype = "float32";  // x is float32; bf16 tables promote to it
  std::vector<int64_t> table = o.per_batch_table ? std::vector<int64_t>{b, 1, t, d} : std::vector<int64_t>{t, d};
  GraphDoc g;
  g.input("x", x_shape).input("cos", table, o.table_dtype, "buffer").input("sin", table, o.table_dtype, "buffer");
  g.op("x_cos", "aten.mul.Tensor", {ref_to("x"), ref_to("cos")}, x_shape, out_dtype);
  const int64_t hi_size = o.interleaved ? d / 2 : d - half, lo_size = o.interleaved ? (d + 1) / 2 : half;
  if (o.interleaved) {
    g.op("hi", "aten.slice.Tensor", {ref_to("x"), 3, 1, kMax, 2}, {b, h, t, hi_size});
    g.op("lo", "aten.slice.Tensor", {ref_to("x"), 3, 0, kMax, 2}, {b, h, t, lo_size});
  } else {
    g.op("hi", "aten.slice.Tensor", {ref_to("x"), 3, half, kMax}, {b, h, t, hi_size});
    g.op("lo", "aten.slice.Tensor", {ref_to("x"), 3, 0, half}, {b, h, t, lo_size});
  }
  std::string first = "neg";
  if (o.no_neg) first = "hi";
  else g.op("neg", "aten.neg.default", {ref_to("hi")}, {b, h, t, hi_size});
  Json parts = o.swapped ? Json::array({ref_to("lo"), ref_to(first)}) : Json::array({ref_to(first), ref_to("lo")});
  g.op("cat", "aten.cat.default", Json::array({parts, -1}), x_shape);
  g.op("rot_sin", "aten.mul.Tensor", {ref_to("cat"), ref_to("sin")}, x_shape, out_dtype);
  g.op("out", "aten.add.Tensor", {ref_to("x_cos"), ref_to("rot_sin")}, x_shape, out_dtype);
  g.output("out");
  return g;
}

size_t rope_count(const RopeGraph& o) { return ropes(resolved(rope_graph(o).graph())).size(); }

RopeProblem llama3_q(Element e = Element::f32) {
  RopeProblem p;
  p.batch = 2; p.heads = 32; p.seq = 2048; p.head_dim = 128;
  p.x = {2048 * 4096, 128, 4096};
  p.cos = p.sin = {0, 0, 128};
  p.out = p.x;
  p.element = e;
  return p;
}

}  // namespace

TEST(RopeRule, MatchesQAndKOfTheLlama3Block) {
  auto g = fixture("llama3_block.json");
  auto ms = resolved(g);
  auto rs = ropes(ms);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0]->anchor, "add_1");
  EXPECT_EQ(rs[0]->nodes, (std::vector<std::string>{"mul_2", "slice_3", "neg", "slice_4", "cat", "mul_3", "add_1"}));
  EXPECT_EQ(rs[0]->inputs.at("$x"), "transpose");
  EXPECT_EQ(rs[0]->inputs.at("$cos"), "slice_1");  // the [:T] view of the table, shared by q and k: not covered
  EXPECT_EQ(rs[0]->inputs.at("$sin"), "slice_2");
  EXPECT_EQ(rs[0]->dims.at("heads"), 32);
  EXPECT_EQ(rs[0]->dims.at("seq"), 2048);
  EXPECT_EQ(rs[0]->dims.at("head_dim"), 128);
  EXPECT_EQ(rs[0]->family, "rope");
  EXPECT_EQ(rs[1]->anchor, "add_2");
  EXPECT_EQ(rs[1]->inputs.at("$x"), "transpose_1");
  EXPECT_EQ(rs[1]->inputs.at("$cos"), "slice_1");
  EXPECT_EQ(rs[1]->dims.at("heads"), 8);
  // The attention pattern reads both results: q directly, k before its grouped-query expand.
  for (const auto& m : ms)
    if (m.rule == "sdpa_attention") {
      EXPECT_EQ(m.inputs.at("$q"), "add_1");
      EXPECT_EQ(m.inputs.at("$k"), "add_2");
    }
}

TEST(RopeRule, MatchesTheChunkFormOfTheSmallLlamaBlock) {
  auto ms = resolved(fixture("llama_block_small.json"));
  auto rs = ropes(ms);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0]->nodes,
            (std::vector<std::string>{"mul_2", "chunk", "getitem", "getitem_1", "neg", "cat", "mul_3", "add_1"}));
  EXPECT_EQ(rs[0]->dims.at("heads"), 16);
  EXPECT_EQ(rs[1]->dims.at("heads"), 4);
  EXPECT_EQ(rs[1]->dims.at("head_dim"), 64);
  EXPECT_EQ(rs[1]->inputs.at("$x"), "transpose_1");
}

TEST(RopeRule, NearMissesDoNotMatch) {
  EXPECT_EQ(rope_count({}), 1u);  // the half-split form written out as the tracer records it
  RopeGraph o;
  o.interleaved = true;
  EXPECT_EQ(rope_count(o), 0u) << "GPT-J's interleaved pairs are another rotation";
  o = {};
  o.d = 63;
  EXPECT_EQ(rope_count(o), 0u) << "an odd head dim has no two halves";
  o = {};
  o.swapped = true;
  EXPECT_EQ(rope_count(o), 0u) << "cat(x_lo, -x_hi) rotates the other way";
  o = {};
  o.no_neg = true;
  EXPECT_EQ(rope_count(o), 0u) << "without the sign it is no rotation";
  o = {};
  o.per_batch_table = true;
  EXPECT_EQ(rope_count(o), 0u) << "tables must broadcast over batch and heads";
}

TEST(RopeProblem, LlamaMatchesReadTheTransposedViewsInPlace) {
  auto g = fixture("llama3_block.json");
  auto ms = resolved(g);
  auto rs = ropes(ms);
  ASSERT_EQ(rs.size(), 2u);
  ASSERT_EQ(kernel_family_for(*rs[0]), kernel_family_named("rope"));
  RopeProblem q = rope_problem_from_match(*rs[0], g, Numerics::x3tf32, Arch::sm90);
  EXPECT_EQ(q.batch, 2);
  EXPECT_EQ(q.heads, 32);
  EXPECT_EQ(q.seq, 2048);
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_EQ(q.x, (HeadStrides{2048 * 4096, 128, 4096}));  // [B, T, H, D] seen as [B, H, T, D]
  EXPECT_EQ(q.cos, (HeadStrides{0, 0, 128}));
  EXPECT_EQ(q.sin, (HeadStrides{0, 0, 128}));
  EXPECT_EQ(q.element, Element::f32);  // a matmul mode leaves the elementwise rotary in fp32
  EXPECT_EQ(q.numerics(), Numerics::fp32);
  // The op's result has the layout the traced graph had at the anchor (what the attention after it saw).
  const auto& anchor = g.at("add_1").out();
  EXPECT_EQ(q.out, (HeadStrides{anchor.strides[0], anchor.strides[1], anchor.strides[2]}));
  EXPECT_EQ(q.max_vector_elems(), 4);
  EXPECT_EQ(RopeProblem::from_json(q.to_json()).to_json(), q.to_json());
  RopeProblem k = rope_problem_from_match(*rs[1], g, Numerics::bf16, Arch::sm80);
  EXPECT_EQ(k.heads, 8);
  EXPECT_EQ(k.x, (HeadStrides{2048 * 1024, 128, 1024}));
  EXPECT_EQ(k.element, Element::bf16);
  EXPECT_EQ(k.max_vector_elems(), 8);
}

TEST(RopeProblem, OneHeadTablesAndRefusals) {
  // [B, T, D] x: one head; the dense output of a contiguous x is contiguous.
  EXPECT_EQ(dense_strides_like({16 * 64, 0, 64}, 2, 1, 16, 64), (HeadStrides{16 * 64, 64, 64}));
  EXPECT_EQ(dense_strides_like({8 * 5 * 64, 64, 8 * 64}, 3, 8, 5, 64), (HeadStrides{8 * 5 * 64, 64, 8 * 64}));
  // A strided (non-dense) view keeps its dim order and packs densely.
  EXPECT_EQ(dense_strides_like({5 * 3 * 8 * 64, 64, 3 * 8 * 64}, 2, 8, 5, 64), (HeadStrides{5 * 8 * 64, 64, 8 * 64}));

  RopeGraph o;
  o.table_dtype = "bfloat16";  // bf16 tables times fp32 x promote: the kernel has one element type
  auto g = rope_graph(o).graph();
  auto ms = resolved(g);
  auto rs = ropes(ms);
  ASSERT_EQ(rs.size(), 1u);
  try {
    rope_problem_from_match(*rs[0], g, Numerics::fp32, Arch::sm90);
    FAIL() << "mixed-dtype tables must be refused";
  } catch (const fact::Error& e) {
    EXPECT_TRUE(contains(e.what(), "mixed-dtype")) << e.what();
  }
  RopeProblem p = llama3_q();
  p.head_dim = 127;
  EXPECT_THROW(p.validate(), fact::Error);
  p = llama3_q();
  p.x.row = 64;  // rows overlap
  EXPECT_THROW(p.validate(), fact::Error);
}

TEST(RopeConfigSpace, WideVectorsWhereTheStridesAllowThem) {
  RopeProblem p = llama3_q();
  auto space = enumerate_rope_configs(p, 6);
  EXPECT_EQ(space.enumerated, 27);
  ASSERT_EQ(space.ranked.size(), 6u);
  for (const auto& c : space.ranked) {
    EXPECT_EQ(rope_config_rejection(p, c), "") << c.summary();
    EXPECT_EQ(RopeConfig::from_json(c.to_json()).id(), c.id());
    EXPECT_EQ(c.head_dim, 128);
  }
  EXPECT_EQ(space.ranked[0].vector_elems, 4);  // 128-bit accesses of fp32
  EXPECT_EQ(space.ranked[0].pairs_per_row(), 16);
  EXPECT_EQ(enumerate_rope_configs(llama3_q(Element::bf16), 1).ranked[0].vector_elems, 8);
  // A table row stride of 66 (a padded [T, 66] buffer sliced to 64) allows only pairs of fp32.
  p.cos.row = 66;
  for (const auto& c : enumerate_rope_configs(p, 50).ranked) EXPECT_LE(c.vector_elems, 2) << c.summary();
  p = llama3_q();
  p.x.row = 4097;  // odd: scalar accesses only
  for (const auto& c : enumerate_rope_configs(p, 50).ranked) EXPECT_EQ(c.vector_elems, 1) << c.summary();
}

TEST(RopeCodegen, KernelForEachDtypeCarriesTheConfigAndExportsTheAbi) {
  for (auto [e, type, vector] : {std::tuple{Element::f32, "float", 4}, {Element::bf16, "cutlass::bfloat16_t", 8},
                                 {Element::f16, "cutlass::half_t", 8}}) {
    RopeConfig c = enumerate_rope_configs(llama3_q(e), 1).ranked.at(0);
    auto src = generate_rope_kernel(c);
    EXPECT_EQ(src.template_name, "cute/rope_fwd.cu.in");
    EXPECT_FALSE(contains(src.text, "{{"));
    EXPECT_TRUE(contains(src.text, std::string("using Element = ") + type + ";")) << type;
    EXPECT_TRUE(contains(src.text, "constexpr int kHeadDim = 128;"));
    EXPECT_TRUE(contains(src.text, "constexpr int kVector = " + std::to_string(vector) + ";"));
    EXPECT_TRUE(contains(src.text, "fmaf("));
    EXPECT_TRUE(contains(src.text, "int fact_" + c.id() + "_run(const FactRopeArgs* args)"));
    EXPECT_TRUE(contains(src.text, "fact_" + c.id() + "_can_implement"));
    EXPECT_TRUE(contains(src.text, c.to_json().dump()));
  }
  RopeConfig bad = enumerate_rope_configs(llama3_q(), 1).ranked.at(0);
  bad.vector_elems = 3;  // a half row of 64 is no whole number of 3-vectors
  EXPECT_THROW(generate_rope_kernel(bad), fact::Error);
}

TEST(RopeCodegen, OpWrapperSchemaAndLayout) {
  RopeConfig c = enumerate_rope_configs(llama3_q(Element::bf16), 1).ranked.at(0);
  EXPECT_EQ(rope_op_schema(c), c.id() + "(Tensor x, Tensor cos, Tensor sin) -> Tensor");
  auto w = generate_rope_op_wrapper(c);
  EXPECT_FALSE(contains(w.text, "{{"));
  EXPECT_TRUE(contains(w.text, "at::kBFloat16"));
  EXPECT_TRUE(contains(w.text, "at::empty_like(x)"));  // the layout PyTorch's elementwise ops give
  EXPECT_TRUE(contains(w.text, "TORCH_LIBRARY_IMPL(fact, Meta, m)"));
  EXPECT_TRUE(contains(w.text, "\"" + rope_op_schema(c) + "\"); }"));
}

TEST(KernelFamilySeam, RopeMeasureRequestHasThePythonCaseFields) {
  const KernelFamily* rope = kernel_family_named("rope");
  ASSERT_NE(rope, nullptr);
  auto problem = llama3_q().to_json();
  auto cands = rope->candidates(problem, 2).ranked;
  ASSERT_EQ(cands.size(), 2u);
  EXPECT_EQ(rope->candidate_from_config(cands[1].config).kernel.text, cands[1].kernel.text);
  EXPECT_EQ(rope->workload_key("rope", problem).numerics, "fp32");
  auto req = family_measure_request(*rope, problem, {{cands[0].config_id, "/tmp/x.so", cands[0].config_id}});
  EXPECT_EQ(req["family"], "rope");
  const auto& mp = req["problem"];
  // python/fact/realize/rope_case.py PROBLEM_KEYS, exactly.
  std::set<std::string> keys;
  for (const auto& [k, v] : mp.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"batch", "heads", "seq", "head_dim", "x_strides", "cos_strides",
                                         "sin_strides", "out_strides", "dtype", "numerics"}));
  EXPECT_EQ(mp["x_strides"], Json::array({2048 * 4096, 128, 4096}));
  EXPECT_EQ(mp["dtype"], "float32");
}

namespace {

void expect_rope_compiles(const RopeProblem& p, const std::string& name) {
  RopeConfig c = enumerate_rope_configs(p, 1).ranked.at(0);
  expect_kernel_compiles(c.arch, generate_rope_kernel(c).text, name, c.summary());
}

}  // namespace

TEST(RopeCodegenNvcc, Sm90Fp32Compiles) { expect_rope_compiles(llama3_q(), "sm90_fp32_rope"); }

TEST(RopeCodegenNvcc, Sm80Bf16Compiles) {
  RopeProblem p = llama3_q(Element::bf16);
  p.arch = Arch::sm80;
  expect_rope_compiles(p, "sm80_bf16_rope");
}
