// Grown GEMM epilogues (issue 16, the contract with discover's region growth): tree leaves for the vec<i> slots
// (row, column, run-time scalar), activations with params or without a CUTLASS functor, their sm90 visitor
// trees and generated functors, sm80's refusal, the op wrapper's vectors argument, the problem built from a
// Match carrying "epilogue_tree", and (tests named *Nvcc*) nvcc compiles of grown trees for sm_90a.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/paths.h"
#include "core/process.h"
#include "discover/match.h"
#include "gemm_test_configs.h"
#include "ir_test_graphs.h"
#include "realize/families/gemm/epilogue_sm80.h"
#include "realize/families/gemm/epilogue_sm90_evt.h"
#include "realize/families/gemm/gemm_codegen.h"
#include "realize/families/gemm/gemm_config_space.h"
#include "realize/families/gemm/gemm_epilogue.h"
#include "realize/families/gemm/gemm_workload.h"
#include "realize/kernel_abi_header.h"
#include "realize/kernel_family.h"
#include "realize/nvcc_command.h"
#include "torch_headers_check.h"

namespace fs = std::filesystem;
using namespace fact;
using namespace fact::realize;
using nlohmann::json;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

EpilogueTree tree(const char* text) { return EpilogueTree::from_json(json::parse(text)); }

std::string error_of(const char* text) {
  try {
    tree(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// leaky_relu(mul(add(mul(alpha, acc), row(bias)), 2.0)) with a non-default slope: a Linear, a scale, an activation
// with a param and no CUTLASS functor.
constexpr const char* kLeakyTree =
    R"(["leaky_relu", ["mul", ["add", ["mul", "alpha", "acc"], {"row": "bias"}], 2.0], {"negative_slope": 0.1}])";
// A Linear followed by an eval BatchNorm as FACT's graph reads it ((y - mean) / sqrt(var + eps) * weight + bias),
// then a ReLU: four row vectors.
constexpr const char* kBatchNormTree =
    R"(["relu", ["add", ["mul", ["div", ["sub", ["add", ["mul", "alpha", "acc"], {"row": "bias"}], {"row": "vec0"}],
        ["sqrt", ["add", {"row": "vec1"}, 1e-05]]], {"row": "vec2"}], {"row": "vec3"}]])";

fs::path expect_compiles(const GemmConfig& c, const std::string& name) {
  auto src = generate_gemm_kernel(c);
  fs::path dir = fs::temp_directory_path() / "fact_test_nvcc";
  fs::create_directories(dir);
  fs::path cu = dir / (name + ".cu"), obj = dir / (name + ".o");
  std::ofstream(cu) << src.text;
  auto t0 = std::chrono::steady_clock::now();
  fact::ProcessOptions o;
  o.timeout = std::chrono::seconds(1100);
  auto r = fact::run_process(nvcc_command(c, cu, obj, fact::cutlass_dir(), NvccOutput::object), o);
  std::printf("[nvcc] %s (%s): %.1f s, exit %d\n", name.c_str(), c.summary().c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), r.exit_code);
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 6000);
  EXPECT_TRUE(fs::exists(obj));
  return obj;
}

}  // namespace

TEST(GrownEpilogueTree, NewLeavesAndParamsRoundTrip) {
  for (const char* text : {R"(["add", ["mul", "alpha", "acc"], {"row": "vec3"}])",
                           R"(["mul", ["mul", "alpha", "acc"], {"col": "vec0"}])",
                           R"(["add", ["mul", {"scalar": "vec7"}, "acc"], "residual"])", kLeakyTree, kBatchNormTree,
                           R"(["elu", "acc", {"alpha": 1.5, "input_scale": 1, "scale": 2}])"}) {
    EpilogueTree t = tree(text);
    EXPECT_EQ(EpilogueTree::from_json(t.to_json()).text(), t.text()) << text;
    EXPECT_EQ(t.to_json(), json::parse(text)) << text;
  }
  EXPECT_EQ(tree(kLeakyTree).text(), "leaky_relu[negative_slope=0.1](mul(add(mul(alpha,acc),row(bias)),2))");
  EXPECT_EQ(tree(R"(["elu", "acc", {"alpha": 1.5, "input_scale": 1, "scale": 2}])").text(),
            "elu[alpha=1.5,input_scale=1,scale=2](acc)");
  EXPECT_EQ(tree(R"(["mul", {"scalar": "vec2"}, {"col": "vec1"}])").text(), "mul(scalar(vec2),col(vec1))");
  // Param-less nodes keep their text (named epilogues, config ids, tuning keys).
  EXPECT_EQ(tree(R"(["sigmoid", "acc"])").text(), "sigmoid(acc)");
  EXPECT_EQ(Epilogue::of(EpilogueTree::from_json(Epilogue::named_tree("bias_relu").to_json())).name, "bias_relu");
  EpilogueTree bn = tree(kBatchNormTree);
  EXPECT_EQ(bn.vector_slots(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(bn.reads_bias());
  EXPECT_FALSE(tree(R"(["add", "acc", {"row": "vec0"}])").reads_bias());
  EXPECT_EQ(bn.node_count(), 17);
}

TEST(GrownEpilogueTree, BadNewFormsAreErrorsNamingTheNode) {
  EXPECT_TRUE(contains(error_of(R"(["add", "acc", {"row": "vec8"}])"), "vec0..vec7")) << error_of(R"({"row": "vec8"})");
  EXPECT_TRUE(contains(error_of(R"(["add", "acc", {"scalar": "bias"}])"), "run-time scalar"));
  EXPECT_TRUE(contains(error_of(R"(["add", "acc", {"col": "weight"}])"), "'weight'"));
  // Every param, numbers only, none unknown.
  std::string missing = error_of(R"(["leaky_relu", "acc"])");
  EXPECT_TRUE(contains(missing, "'negative_slope' is missing")) << missing;
  std::string partial = error_of(R"(["hardtanh", "acc", {"min_val": -2}])");
  EXPECT_TRUE(contains(partial, "'max_val' is missing")) << partial;
  std::string text = error_of(R"(["leaky_relu", "acc", {"negative_slope": "0.1"}])");
  EXPECT_TRUE(contains(text, "not a number")) << text;
  std::string extra = error_of(R"(["relu", "acc", {"slope": 1}])");
  EXPECT_TRUE(contains(extra, "has no param 'slope'")) << extra;
  EXPECT_TRUE(contains(error_of(R"(["leaky_relu", "acc", {"negative_slope": 0.1}, 3])"), "takes one operand"));
  EXPECT_TRUE(contains(error_of(R"(["swish", "acc"])"), "not in data/epilogues/activations.json"));
}

TEST(GrownEpilogueSm90, EachLeafKindReadsItsSlot) {
  EpilogueTree t = tree(R"(["add", ["add", ["mul", {"scalar": "vec5"}, "acc"], {"row": "vec0"}], {"col": "vec2"}])");
  ASSERT_FALSE(sm90_evt_rejection(t));
  std::string type = sm90_evt_type(t, false), args = sm90_evt_arguments(t);
  EXPECT_TRUE(contains(type, "fusion::Sm90ScalarBroadcast<ElementBias, ScalarStride>")) << type;
  EXPECT_TRUE(contains(type, "fusion::Sm90RowBroadcast<0, TileShape, ElementBias, ElementCompute, RowStride")) << type;
  EXPECT_TRUE(contains(type, "fusion::Sm90ColBroadcast<0, TileShape, ElementBias, ElementCompute, ColStride")) << type;
  EXPECT_TRUE(contains(args, "{ {ElementBias(0)}, {static_cast<const ElementBias*>(a.vectors[5])}, {ScalarStride{}} }"))
      << args;
  EXPECT_TRUE(contains(args, "{ static_cast<const ElementBias*>(a.vectors[0]), ElementBias(0), RowStride{} }")) << args;
  // A column vector has one value per row of every batch.
  EXPECT_TRUE(contains(args, "{ static_cast<const ElementBias*>(a.vectors[2]), ElementBias(0), "
                             "ColStride{cute::_1{}, cute::_0{}, a.m} }")) << args;
  EXPECT_EQ(sm90_evt_functors(t), "");
  // The bias slot stays as it was.
  EXPECT_TRUE(contains(sm90_evt_arguments(Epilogue::named("bias").tree),
                       "{ static_cast<const ElementBias*>(a.bias), ElementBias(0), RowStride{} }"));
}

TEST(GrownEpilogueSm90, ActivationsWithParamsOrWithoutCutlassGetGeneratedFunctors) {
  EpilogueTree t = tree(
      R"(["add", ["leaky_relu", ["sigmoid", "acc"], {"negative_slope": 0.1}],
                 ["leaky_relu", ["relu", "acc"], {"negative_slope": 0.2}]])");
  std::string type = sm90_evt_type(t, true), functors = sm90_evt_functors(t);
  // relu keeps CUTLASS's functor; sigmoid (cutlass null) and each distinct leaky_relu get their own struct.
  EXPECT_TRUE(contains(type, "cutlass::epilogue::thread::ReLu")) << type;
  EXPECT_TRUE(contains(functors, "struct FactAct_sigmoid_")) << functors;
  EXPECT_TRUE(contains(functors, "return fact_act::times_sigmoid(1.0f, x);")) << functors;
  EXPECT_TRUE(contains(functors, "constexpr float negative_slope = static_cast<float>(0.1);")) << functors;
  EXPECT_TRUE(contains(functors, "constexpr float negative_slope = static_cast<float>(0.2);")) << functors;
  EXPECT_TRUE(contains(functors, "fact_act::Elementwise<T, FactAct_leaky_relu_")) << functors;
  size_t structs = 0;
  for (size_t at = functors.find("template <class T>"); at != std::string::npos; at = functors.find("template <class T>", at + 1))
    ++structs;
  EXPECT_EQ(structs, 3u);
  // Each name in the type is a struct of the functors, and equal nodes share a stable name.
  for (size_t at = type.find("FactAct_"); at != std::string::npos; at = type.find("FactAct_", at + 1)) {
    std::string name = type.substr(at, type.find(',', at) - at);
    EXPECT_TRUE(contains(functors, "struct " + name + " :")) << name;
  }
  EXPECT_TRUE(contains(sm90_evt_functors(tree(R"(["leaky_relu", ["neg", "acc"], {"negative_slope": 0.1}])")),
                       sm90_evt_functors(tree(R"(["leaky_relu", "acc", {"negative_slope": 0.1}])"))));
  // The kernel source renders fp32_activation.hpp.in (fact_act::Elementwise) before the generated functors.
  auto c = realize::test::sm90_bf16_cooperative();
  c.epilogue = Epilogue::of(tree(kLeakyTree));
  std::string src = generate_gemm_kernel(c).text;
  size_t helpers = src.find("struct Elementwise"), generated = src.find("struct FactAct_leaky_relu_");
  ASSERT_NE(helpers, std::string::npos);
  ASSERT_NE(generated, std::string::npos);
  EXPECT_LT(helpers, generated);
  // can_implement refuses a call whose slots are unset (a null slot would read as zeros) or misaligned rows.
  c.epilogue = Epilogue::of(tree(R"(["add", ["mul", {"scalar": "vec3"}, "acc"], {"row": "vec1"}])"));
  src = generate_gemm_kernel(c).text;
  EXPECT_TRUE(contains(src, "  if (!a.vectors[1]) return FACT_ERR_SHAPE;  // vec1\n"
                            "  if (!aligned(a.vectors[1], kAlignmentBias, sizeof(ElementBias))) return FACT_ERR_SHAPE;\n"
                            "  if (!a.vectors[3]) return FACT_ERR_SHAPE;  // vec3\n"
                            "  if (a.beta != 0.0f && !a.c)")) << src;
  // Existing epilogues render no generated functor and no slot checks.
  c.epilogue = Epilogue::named("bias_gelu_tanh");
  src = generate_gemm_kernel(c).text;
  EXPECT_FALSE(contains(src, "FactAct_"));
  EXPECT_FALSE(contains(src, "a.vectors"));
  EXPECT_TRUE(contains(src, "  if (kHasResidual && !aligned(a.residual, kAlignmentD, sizeof(ElementD))) return "
                            "FACT_ERR_SHAPE;\n  if (a.beta != 0.0f && !a.c)"));
}

TEST(GrownEpilogueSm90, RefusesWhatOneKernelCannotRead) {
  auto why = sm90_evt_rejection(tree(R"(["add", ["add", "acc", {"row": "vec1"}], {"col": "vec1"}])"));
  ASSERT_TRUE(why);
  EXPECT_TRUE(contains(*why, "slot vec1 as two kinds")) << *why;
  why = sm90_evt_rejection(tree(R"(["add", ["add", "acc", "C"], "residual"])"));
  ASSERT_TRUE(why);
  EXPECT_TRUE(contains(*why, "reads C and the residual")) << *why;
  json big = "acc";
  for (int i = 0; i < 40; ++i) big = json::array({"add", big, 1.0});
  why = sm90_evt_rejection(EpilogueTree::from_json(big));
  ASSERT_TRUE(why);
  EXPECT_TRUE(contains(*why, "81 nodes")) << *why;
  // Several vectors and the residual together are fine.
  EXPECT_FALSE(sm90_evt_rejection(tree(
      R"(["add", ["mul", ["add", ["mul", "alpha", "acc"], {"row": "vec0"}], {"col": "vec1"}], "residual"])")));
}

TEST(GrownEpilogueSm80, RefusesGrownTreesWithAReason) {
  for (const char* text : {kLeakyTree, kBatchNormTree, R"(["sigmoid", ["add", ["mul", "alpha", "acc"], {"row": "bias"}]])"}) {
    auto why = sm80_epilogue_rejection(tree(text));
    ASSERT_TRUE(why) << text;
    EXPECT_TRUE(contains(*why, "stays PyTorch's on sm80")) << *why;
  }
  EXPECT_TRUE(contains(*sm80_epilogue_rejection(tree(kLeakyTree)), "leaky_relu has no CUTLASS functor taking params"));
  EXPECT_TRUE(contains(*sm80_epilogue_rejection(tree(kBatchNormTree)), "reads vec<i> slots"));
  // The config space offers no sm80 kernel for them: the pattern stays PyTorch's on sm80.
  auto p = GemmProblem::packed(512, 256, 128, 1, Numerics::tf32, Arch::sm80, true, Epilogue::of(tree(kLeakyTree)));
  try {
    enumerate_gemm_configs(p, {.top_n = 10});
    ADD_FAILURE() << "an sm80 config was offered for " << p.workload_key();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "no GEMM kernel config fits")) << e.what();
    EXPECT_TRUE(contains(e.what(), "stays PyTorch's on sm80")) << e.what();
  }
  // What sm80 had stays.
  EXPECT_FALSE(sm80_epilogue_rejection(Epilogue::named("bias_gelu_tanh").tree));
}

TEST(GrownEpilogueOp, VectorsRideInATensorListOnlyWhenTheTreeReadsThem) {
  auto c = realize::test::sm90_bf16_cooperative();
  c.epilogue = Epilogue::named("bias");
  std::string plain = gemm_op_wrapper_fragment(c);
  EXPECT_FALSE(contains(plain, "vectors"));
  EXPECT_EQ(gemm_op_schema_arguments(c.epilogue),
            "(Tensor a, Tensor b, Tensor? bias, Tensor? residual, *, bool b_constant=False) -> Tensor");
  c.epilogue = Epilogue::of(tree(R"(["add", ["mul", {"scalar": "vec4"}, "acc"], {"col": "vec1"}])"));
  std::string op = gemm_op_wrapper_fragment(c);
  EXPECT_EQ(gemm_op_schema_arguments(c.epilogue),
            "(Tensor a, Tensor b, Tensor? bias, Tensor? residual, Tensor[] vectors, *, bool b_constant=False) -> Tensor");
  EXPECT_TRUE(contains(op, "Tensor? residual, Tensor[] vectors, *, bool b_constant=False) -> Tensor\");")) << op;
  EXPECT_TRUE(contains(op, "const int64_t vector_numel[] = {batch * m, int64_t(1)};")) << op;
  EXPECT_TRUE(contains(op, "const int vector_slot[] = {1, 4};")) << op;
  EXPECT_TRUE(contains(op, "args.vectors[vector_slot[j]] = vectors[j].data_ptr();")) << op;
  EXPECT_TRUE(contains(op, "const std::optional<at::Tensor>& residual, at::TensorList vectors)")) << op;
  auto family = kernel_family_named("gemm");
  EXPECT_EQ(family->op_schema(c.to_json()), "gemm_" + c.id() + gemm_op_schema_arguments(c.epilogue));
}

// The wrapper of an op with vectors is built on the GPU machine; here it is parsed against the venv's torch headers.
TEST(GrownEpilogueOp, WrapperWithVectorsParsesAgainstTorchHeaders) {
  const std::string torch_dir = torch_package_dir();
  if (torch_dir.empty()) GTEST_SKIP() << "no torch headers in " << fact::python_exe();
  auto c = realize::test::sm90_bf16_cooperative();
  c.epilogue = Epilogue::of(tree(kBatchNormTree));
  auto d = realize::test::sm90_bf16_cooperative();
  d.epilogue = Epilogue::of(tree(R"(["add", ["mul", {"scalar": "vec4"}, "acc"], {"col": "vec1"}])"));
  fs::path dir = fs::temp_directory_path() / "fact_test_wrapper_vectors";
  fs::create_directories(dir);
  std::ofstream(dir / "ops.cpp") << generate_gemm_op_wrapper({c, d, realize::test::sm90_bf16_cooperative()}).text;
  auto r = parse_against_torch(torch_dir, dir / "ops.cpp", fact::realize::kernel_abi_include_dir());
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 4000);
}

namespace {

// x [8, 64] -> linear(w [32, 64], b [32]) -> the grown tail; the match as discover's growth writes it.
struct GrownMatch {
  fact::test::GraphDoc doc;
  discover::Match m;
};

GrownMatch grown_match(const std::vector<int64_t>& vec_shape, const std::string& vec_dtype, const char* tree_json,
                       bool residual = false, const char* weight_kind = "parameter") {
  GrownMatch g;
  g.doc.input("x", {8, 64}).input("w", {32, 64}, "float32", weight_kind).input("b", {32}, "float32", "parameter")
      .input("v", vec_shape, vec_dtype, "parameter").input("r", {8, 32})
      .op("linear", "aten.linear.default", {fact::test::ref_to("x"), fact::test::ref_to("w"), fact::test::ref_to("b")}, {8, 32})
      .output("linear");
  g.m.rule = "linear_bias";
  g.m.family = "gemm";
  g.m.anchor = "linear";
  g.m.nodes = {"linear"};
  g.m.inputs = {{"$x", "x"}, {"$w", "w"}, {"$b", "b"}, {"$vec0", "v"}, {"$residual", "r"}};
  g.m.attrs = {{"b_layout", "nk"}};
  g.m.dims = {{"M", 8}, {"N", 32}, {"K", 64}};
  g.m.dtype = "float32";
  g.m.kernel = {{"family", "gemm"}, {"epilogue", "bias"},
                {"operands", {{"a", "$x"}, {"b", "$w"}, {"bias", "$b"}, {"vec0", "$vec0"}}},
                {"epilogue_tree", json::parse(tree_json)}};
  if (residual) g.m.kernel["operands"]["residual"] = "$residual";
  return g;
}

std::string problem_error(const GrownMatch& g) {
  try {
    gemm_problem_from_match(g.m, g.doc.graph(), Numerics::tf32, Arch::sm90);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(GrownEpilogueWorkload, MatchWithEpilogueTreeBindsAndChecksItsSlots) {
  const char* row = R"(["mul", ["add", ["mul", "alpha", "acc"], {"row": "bias"}], {"row": "vec0"}])";
  auto g = grown_match({1, 32}, "float32", row);
  GemmProblem p = gemm_problem_from_match(g.m, g.doc.graph(), Numerics::tf32, Arch::sm90);
  EXPECT_EQ(p.epilogue.key(), "mul(add(mul(alpha,acc),row(bias)),row(vec0))");
  EXPECT_EQ(GemmProblem::from_json(p.to_json()).epilogue, p.epilogue);
  // Wrong length, wrong dtype, a column vector shaped as a row, a scalar with several values: Errors naming the slot.
  EXPECT_TRUE(contains(problem_error(grown_match({31}, "float32", row)), "epilogue slot vec0")) << problem_error(grown_match({31}, "float32", row));
  std::string dt = problem_error(grown_match({32}, "bfloat16", row));
  EXPECT_TRUE(contains(dt, "epilogue slot vec0 is bfloat16")) << dt;
  const char* col = R"(["mul", ["add", ["mul", "alpha", "acc"], {"row": "bias"}], {"col": "vec0"}])";
  EXPECT_TRUE(problem_error(grown_match({8, 1}, "float32", col)).empty()) << problem_error(grown_match({8, 1}, "float32", col));
  EXPECT_TRUE(contains(problem_error(grown_match({1, 8}, "float32", col)), "one per output row"));
  const char* scalar = R"(["mul", ["add", ["mul", "alpha", "acc"], {"row": "bias"}], {"scalar": "vec0"}])";
  EXPECT_TRUE(problem_error(grown_match({1}, "float32", scalar)).empty());
  EXPECT_TRUE(contains(problem_error(grown_match({2}, "float32", scalar)), "a one-element tensor"));
  // A slot the operands do not bind; a residual; C.
  std::string unbound = problem_error(grown_match({32}, "float32",
      R"(["mul", ["add", ["mul", "alpha", "acc"], {"row": "bias"}], {"row": "vec3"}])"));
  EXPECT_TRUE(contains(unbound, "binds no tensor to \"vec3\"")) << unbound;
  const char* res = R"(["add", ["add", ["mul", "alpha", "acc"], {"row": "bias"}], "residual"])";
  EXPECT_TRUE(problem_error(grown_match({32}, "float32", res, true)).empty()) << problem_error(grown_match({32}, "float32", res, true));
  EXPECT_TRUE(contains(problem_error(grown_match({32}, "float32", res, false)), "reads the residual"));
  EXPECT_TRUE(contains(problem_error(grown_match({32}, "float32", R"(["add", ["mul", "alpha", "acc"], "C"])")),
                       "reads C or beta"));
  EXPECT_TRUE(contains(problem_error(grown_match({32}, "float32", R"(["leaky_relu", "acc"])")),
                       "epilogue_tree: "));
}

namespace {

OpCall grown_op_call(const GrownMatch& g, const ir::Graph& graph) {
  GemmProblem p = gemm_problem_from_match(g.m, graph, Numerics::tf32, Arch::sm90);
  auto c = realize::test::sm90_bf16_cooperative();
  c.epilogue = p.epilogue;
  json problem = p.to_json(), config = c.to_json();
  OpCallSite site{g.m, graph, problem, config, "torch.ops.fact.gemm_x", "linear", "pattern linear_bias",
                  [&](const char* operand, bool) -> std::string {
                    std::string var = g.m.kernel["operands"].value(operand, "");
                    return var.empty() ? "None" : g.m.inputs.at(var);
                  },
                  [&](const char* operand) -> const ir::Node* {
                    std::string var = g.m.kernel["operands"].value(operand, "");
                    return var.empty() ? nullptr : graph.find(g.m.inputs.at(var));
                  }};
  return kernel_family_named("gemm")->op_call(site);
}

}  // namespace

// A Linear's weight is module state: the problem says so (its own tuning key, timed with B's pre-pass copy kept),
// and the op call marks it so the op keeps that copy; a weight passed as a forward input is neither.
TEST(GrownEpilogueWorkload, AWeightThatIsModuleStateIsMarkedConstant) {
  const char* row = R"(["mul", ["add", ["mul", "alpha", "acc"], {"row": "bias"}], {"row": "vec0"}])";
  auto param = grown_match({1, 32}, "float32", row);
  auto input = grown_match({1, 32}, "float32", row, false, "input");
  ir::Graph pg = param.doc.graph(), ig = input.doc.graph();
  GemmProblem p = gemm_problem_from_match(param.m, pg, Numerics::x3tf32, Arch::sm90);
  GemmProblem q = gemm_problem_from_match(input.m, ig, Numerics::x3tf32, Arch::sm90);
  EXPECT_TRUE(p.b.constant);
  EXPECT_FALSE(q.b.constant);
  EXPECT_FALSE(p.a.constant);
  EXPECT_TRUE(GemmProblem::from_json(p.to_json()).b.constant);
  EXPECT_FALSE(q.to_json()["b"].contains("constant"));
  EXPECT_NE(p.workload_key(), q.workload_key());
  EXPECT_TRUE(contains(p.workload_key(), "_wb_"));
  json pm = kernel_family_named("gemm")->measure_problem(p.to_json());
  EXPECT_EQ(pm.value("b_constant", false), true);
  EXPECT_FALSE(kernel_family_named("gemm")->measure_problem(q.to_json()).contains("b_constant"));
  EXPECT_TRUE(contains(grown_op_call(param, pg).expression, ", b_constant=True)"));
  EXPECT_FALSE(contains(grown_op_call(input, ig).expression, "b_constant"));
}

TEST(GrownEpilogueWorkload, OpCallPassesTheSlotsFlattened) {
  const char* row = R"(["mul", ["add", ["mul", "alpha", "acc"], {"row": "bias"}], {"row": "vec0"}])";
  auto g = grown_match({1, 32}, "float32", row, false, "input");  // a weight input: no b_constant
  ir::Graph graph = g.doc.graph();
  EXPECT_EQ(grown_op_call(g, graph).expression, "torch.ops.fact.gemm_x(x, w.t(), b, None, [v.reshape(-1)])");
}

// A grown tree compiles for sm_90a: a param activation without a CUTLASS functor over a scaled Linear, and a
// BatchNorm folded into the epilogue (four row vectors under a sqrt and a division) in bf16.
TEST(GemmCodegenNvcc, Sm90GrownEpilogueTreesCompile) {
  auto c = realize::test::sm90_bf16_cooperative();
  c.epilogue = Epilogue::of(tree(kLeakyTree));
  expect_compiles(c, "sm90_bf16_grown_leaky_relu");
  c.epilogue = Epilogue::of(tree(
      R"(["add", ["mul", ["relu", ["add", ["mul", ["div", ["sub", ["add", ["mul", "alpha", "acc"], {"row": "bias"}],
          {"row": "vec0"}], ["sqrt", ["add", {"row": "vec1"}, 1e-05]]], {"row": "vec2"}], {"row": "vec3"}]],
          {"scalar": "vec4"}], {"col": "vec5"}])"));
  expect_compiles(c, "sm90_bf16_grown_batchnorm_scalar_col");
}
// fp32-accurate 3xTF32 (the split pre-pass template): generated functors beside FACT's accurate GELU, with a
// column vector, a scalar and the residual.
TEST(GemmCodegenNvcc, Sm90ThreeTf32GrownEpilogueTreeCompiles) {
  auto p = GemmProblem::packed(1024, 512, 256, 1, Numerics::x3tf32, Arch::sm90, true, Epilogue::of(tree(
      R"(["add", ["mish", ["mul", ["gelu_tanh", ["add", ["mul", "alpha", "acc"], {"row": "bias"}]], {"col": "vec0"}]],
          ["mul", ["hardtanh", "residual", {"min_val": -0.5, "max_val": 2}], {"scalar": "vec1"}]])")));
  GemmConfig c;
  for (const auto& r : enumerate_gemm_configs(p, {.top_n = 1000}).ranked)
    if (r.config.mainloop_transform != MainloopTransform::none) {
      c = r.config;
      break;
    }
  ASSERT_NE(c.mainloop_transform, MainloopTransform::none) << "no 3xtf32 pre-pass config for " << p.workload_key();
  std::string src = generate_gemm_kernel(c).text;
  EXPECT_TRUE(contains(src, "fact_act::GeluTanh")) << "fp32-accurate GELU";
  EXPECT_TRUE(contains(src, "struct FactAct_mish_"));
  expect_compiles(c, "sm90_3xtf32_grown_mish_residual");
}
