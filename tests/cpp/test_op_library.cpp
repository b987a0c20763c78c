// The op library folder: winners read from tune reports, the files written, the manifest's fields
// and build commands, and the errors for reports without winners or of the wrong shape.
#include <gtest/gtest.h>

#include "gemm_test_configs.h"

#include <algorithm>
#include <map>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "core/process.h"
#include "core/arch_spec.h"
#include "discover/pattern_registry.h"
#include "discover/plan.h"
#include "ir/ir_io.h"
#include "realize/families/gemm/gemm_problem.h"
#include "realize/kernel_abi_header.h"
#include "realize/kernel_family.h"
#include "realize/nvcc_command.h"
#include "realize/op_library.h"
#include "torch_headers_check.h"

namespace fs = std::filesystem;
using namespace fact;
using namespace fact::realize;
using nlohmann::json;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

GemmConfig sm90_bf16() { return test::sm90_bf16_cooperative(); }
GemmConfig sm80_3xtf32_bias() { return test::sm80_3xtf32(Epilogue::named("bias")); }

json row(const std::string& pattern, const GemmConfig* winner, Numerics numerics, bool b_column, Epilogue e) {
  auto p = GemmProblem::packed(2048, 1024, 512, 1, numerics, Arch::sm90, b_column, e);
  json r = {{"pattern", pattern}, {"anchor", "mm"}, {"family", "gemm"}, {"problem", p.to_json()},
            {"status", winner ? "tuned" : "baseline_kept"},
            {"workload", {{"cutlass_version", "4.2.1"}, {"nvcc_version", "13.0"}}},
            {"fact_ms", 0.05}, {"baseline_ms", 0.06}, {"speedup", 1.2}};
  r["config"] = winner ? winner->to_json() : json(nullptr);
  return r;
}

json report(json rows) {
  return {{"format", "fact-tune-report"}, {"version", 1}, {"arch", "sm90"}, {"rows", std::move(rows)}};
}

fs::path write_report(const std::string& name, const json& j) {
  fs::path p = fs::temp_directory_path() / ("fact_test_op_library_" + name + ".json");
  std::ofstream(p) << j.dump();
  return p;
}

std::string read(const fs::path& p) { return fact::read_text_file(p, "test file"); }

TEST(OpLibrary, TakesWinnersMergesRepeatsAndSkipsRowsWithoutConfig) {
  auto a = sm90_bf16(), b = sm80_3xtf32_bias();
  auto r1 = write_report("r1", report({row("matmul", &a, Numerics::bf16, true, Epilogue::named("none")),
                                       row("linear", nullptr, Numerics::bf16, true, Epilogue::named("none"))}));
  auto r2 = write_report("r2", report({row("linear_bias", &b, Numerics::x3tf32, false, Epilogue::named("bias")),
                                       row("matmul_again", &a, Numerics::bf16, true, Epilogue::named("none"))}));
  auto entries = op_library_entries({r1, r2});
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].config_id, a.id());
  ASSERT_EQ(entries[0].tuned_for.size(), 2u);
  EXPECT_EQ(entries[0].tuned_for[1]["pattern"], "matmul_again");
  EXPECT_EQ(entries[0].tuned_for[1]["report"], r2.string());
  EXPECT_EQ(entries[1].config_id, b.id());
  EXPECT_EQ(entries[1].tuned_for[0]["problem"]["epilogue"], "bias");
}

// The MiniGPT plan's LayerNorm and attention matches as `fact tune` reports their winners: the family's problem
// and its top-ranked config.
json family_rows() {
  const auto& ops = fact::ir::OpTable::builtin();
  static const auto registry = fact::discover::PatternRegistry::builtin();
  auto graph = fact::ir::load_graph(std::string(FACT_TEST_DATA) + "/ir/minigpt_block.json", ops);
  auto plan = fact::discover::make_plan(graph, registry, ops, fact::ArchSpec::builtin("sm90"), fact::Numerics::tf32);
  json rows = json::array();
  for (const auto& e : plan.entries) {
    const KernelFamily* family = kernel_family_for(e.match);
    if (!family || family->name() == "gemm") continue;  // GEMM rows are row()'s
    json problem = family->problem_from_match(e.match, plan.graph, Numerics::tf32, Arch::sm90);
    FamilyCandidate c = family->candidates(problem, 1).ranked.at(0);
    rows.push_back({{"pattern", e.match.rule}, {"anchor", e.match.anchor}, {"family", family->name()},
                    {"status", "tuned"}, {"problem", problem}, {"config", c.config}, {"winner", c.config_id},
                    {"workload", {{"cutlass_version", "4.2.1"}, {"nvcc_version", "13.0"}}},
                    {"fact_ms", 0.05}, {"baseline_ms", 0.06}, {"speedup", 1.2}});
  }
  return rows;
}

// Normalization and attention winners go through the KernelFamily seam into the same library as GEMMs: the kernel
// rendered from the family's template, the family's op wrapper in ops.cpp, a manifest entry with the family's
// schema, config, numerics and nvcc command.
TEST(OpLibrary, FamilyWinnersJoinTheLibraryThroughTheFamilySeam) {
  auto a = sm90_bf16();
  json rows = family_rows();
  ASSERT_EQ(rows.size(), 3u);  // 2 LayerNorms (one config: same problem) + attention
  rows.push_back(row("matmul", &a, Numerics::bf16, true, Epilogue::named("none")));
  std::vector<OpLibraryEntry> entries;
  add_op_library_entries(report(rows), "r.json", entries);
  ASSERT_EQ(entries.size(), 3u);
  std::map<std::string, const OpLibraryEntry*> by_family;
  for (const auto& e : entries) by_family[e.family] = &e;
  ASSERT_EQ(by_family.size(), 3u);
  EXPECT_EQ(by_family["normalization"]->tuned_for.size(), 2u);  // both LayerNorms won with one config
  json attention_row, norm_row;
  for (const auto& r : rows) {  // the op is the winner the tuner named
    std::string f = r.value("family", "gemm");
    if (f != "gemm") EXPECT_EQ(by_family[f]->op_name, r["winner"]);
    if (f == "attention") attention_row = r;
    if (f == "normalization") norm_row = r;
  }
  EXPECT_EQ(by_family["gemm"]->op_name, "gemm_" + a.id());

  fs::path dir = fs::temp_directory_path() / "fact_test_op_library_families";
  fs::remove_all(dir);
  auto folder = write_op_library(entries, dir);
  std::string ops = read(dir / "ops.cpp");
  EXPECT_TRUE(contains(ops, "#include <torch/library.h>"));
  json m = fact::read_json_file(folder.manifest, "manifest");
  ASSERT_EQ(m["ops"].size(), 3u);
  for (const json& op : m["ops"]) {
    std::string id = op["config_id"], name = op["name"];
    EXPECT_EQ(op["op"], "fact::" + name);
    EXPECT_TRUE(contains(ops, "define_once(m, \"" + name + "\",")) << name;
    EXPECT_TRUE(contains(ops, "\"" + op["schema"].get<std::string>() + "\");")) << name;
    EXPECT_TRUE(contains(ops, "m.impl(\"" + name + "\", &fact_ops::" + name + "_cuda)")) << name;
    EXPECT_TRUE(contains(read(dir / "kernels" / (id + ".cu")), "fact_" + id + "_run")) << name;
    EXPECT_EQ(op["kernel_source"], "kernels/" + id + ".cu");
    EXPECT_EQ(op["cutlass_version"], "4.2.1");
    auto args = op["nvcc_args"].get<std::vector<std::string>>();
    EXPECT_NE(std::find(args.begin(), args.end(), "-gencode=arch=compute_90a,code=sm_90a"), args.end()) << name;
    EXPECT_NE(std::find(args.begin(), args.end(), "-I{fact_include}"), args.end()) << name;
    EXPECT_NE(std::find(args.begin(), args.end(), "-c"), args.end()) << name;
    if (op["family"] == "gemm") continue;
    EXPECT_EQ(name, id);  // a family's config id already names its family (norm_..., attn_...)
    EXPECT_EQ(op["tuned_for"][0]["problem"], op["family"] == "attention" ? attention_row["problem"] : norm_row["problem"]);
    if (op["family"] == "normalization") {
      EXPECT_TRUE(contains(id, "norm_"));
      EXPECT_EQ(op["schema"], id + "(Tensor x, Tensor? residual, Tensor? weight, Tensor? bias, float eps) -> Tensor");
      EXPECT_EQ(op["numerics"], "fp32");
      EXPECT_EQ(op["template"], "cute/norm_fwd.cu.in");
      EXPECT_EQ(op["op_template"], "cute/norm_op.cpp.in");
      EXPECT_EQ(op["config"]["kind"], "layer_norm");
      EXPECT_EQ(op["tuned_for"].size(), 2u);
    } else {
      EXPECT_EQ(op["family"], "attention");
      EXPECT_TRUE(contains(id, "attn_"));
      EXPECT_EQ(op["schema"], id + "(Tensor q, Tensor k, Tensor v, Tensor? mask, float scale, bool causal) -> Tensor");
      EXPECT_EQ(op["numerics"], "tf32");
      EXPECT_EQ(op["config"]["head_dim"], 96);
      EXPECT_EQ(op["template"], "cute/attention_fwd.cu.in");
    }
  }
}

TEST(OpLibrary, FamilyRowsThatDoNotParseAreErrorsNamingTheRow) {
  json rows = family_rows();
  auto expect_error = [](json r, const std::string& needle) {
    std::vector<OpLibraryEntry> entries;
    try {
      add_op_library_entries(report({r}), "r.json", entries);
      ADD_FAILURE() << "accepted " << r.dump().substr(0, 200);
    } catch (const fact::Error& e) {
      EXPECT_TRUE(contains(e.what(), needle)) << e.what();
    }
  };
  json bad_config = rows[0];
  bad_config["config"] = {{"family", "normalization"}, {"kind", "layer_norm"}};
  expect_error(bad_config, "rows[0].config");
  json unknown = rows[0];
  unknown["family"] = "convolution";
  expect_error(unknown, "rows[0].family");
  json bad_problem;
  for (const auto& r : rows)
    if (r["family"] == "attention") bad_problem = r;
  bad_problem["problem"].erase("scale");
  expect_error(bad_problem, "rows[0].problem");
}

TEST(OpLibrary, ReportsWithoutWinnersOrOfTheWrongShapeAreErrors) {
  auto none = write_report("none", report({row("linear", nullptr, Numerics::bf16, true, Epilogue::named("none"))}));
  try {
    op_library_entries({none});
    FAIL() << "no winner should be an error";
  } catch (const fact::Error& e) {
    EXPECT_TRUE(contains(e.what(), "no FACT kernel won")) << e.what();
    EXPECT_TRUE(contains(e.what(), none.string())) << e.what();
  }
  EXPECT_THROW(op_library_entries({}), fact::Error);
  EXPECT_THROW(op_library_entries({fs::temp_directory_path() / "fact_test_no_such_report.json"}), fact::Error);

  auto a = sm90_bf16();
  auto expect_error = [](const json& j, const std::string& needle) {
    std::vector<OpLibraryEntry> entries;
    try {
      add_op_library_entries(j, "r.json", entries);
      ADD_FAILURE() << "accepted " << j.dump().substr(0, 200);
    } catch (const fact::Error& e) {
      EXPECT_TRUE(contains(e.what(), needle)) << e.what();
      EXPECT_TRUE(contains(e.what(), "r.json")) << e.what();
    }
  };
  expect_error(json::array(), "not a JSON object");
  expect_error({{"format", "fact-plan"}, {"rows", json::array()}}, "fact-tune-report");
  expect_error({{"format", "fact-tune-report"}}, "\"rows\"");
  auto bad_config = report({row("m", &a, Numerics::bf16, true, Epilogue::named("none"))});
  bad_config["rows"][0]["config"] = "abc";
  expect_error(bad_config, "rows[0].config");
  auto bad_field = report({row("m", &a, Numerics::bf16, true, Epilogue::named("none"))});
  bad_field["rows"][0]["config"]["numerics"] = "fp64";
  expect_error(bad_field, "rows[0].config");
  auto no_problem = report({row("m", &a, Numerics::bf16, true, Epilogue::named("none"))});
  no_problem["rows"][0].erase("problem");
  expect_error(no_problem, "rows[0].problem");
}

TEST(OpLibrary, WritesKernelsOpsAndManifest) {
  auto a = sm90_bf16(), b = sm80_3xtf32_bias();
  std::vector<OpLibraryEntry> entries;
  add_op_library_entries(report({row("matmul", &a, Numerics::bf16, true, Epilogue::named("none")),
                                 row("linear_bias", &b, Numerics::x3tf32, false, Epilogue::named("bias"))}),
                         "r.json", entries);
  fs::path dir = fs::temp_directory_path() / "fact_test_op_library_dir";
  fs::remove_all(dir);
  fs::create_directories(dir / "kernels");
  std::ofstream(dir / "kernels" / "stale.cu") << "// from an earlier set\n";
  auto folder = write_op_library(entries, dir);

  EXPECT_FALSE(fs::exists(dir / "kernels" / "stale.cu"));
  EXPECT_EQ(read(dir / "include" / "kernel_abi.h"), kernel_abi_header());
  std::string ops = read(dir / "ops.cpp");
  EXPECT_TRUE(contains(ops, "TORCH_LIBRARY_FRAGMENT(fact, m)"));
  for (const auto& c : {a, b}) {
    EXPECT_TRUE(contains(read(dir / "kernels" / (c.id() + ".cu")), "fact_" + c.id() + "_run"));
    EXPECT_TRUE(contains(ops, "\"gemm_" + c.id() + "(Tensor a, Tensor b, Tensor? bias, Tensor? residual, *, bool b_constant=False) -> Tensor\");"));
    EXPECT_TRUE(contains(ops, "m.impl(\"gemm_" + c.id() + "\", &fact_ops::gemm_" + c.id() + "_meta)"));
    EXPECT_TRUE(contains(ops, "m.impl(\"gemm_" + c.id() + "\", &fact_ops::gemm_" + c.id() + "_cuda)"));
  }
  EXPECT_EQ(folder.op_names, (std::vector<std::string>{"gemm_" + a.id(), "gemm_" + b.id()}));

  json m = fact::read_json_file(folder.manifest, "manifest");
  EXPECT_EQ(m["format"], "fact-op-library");
  EXPECT_EQ(m["version"], 1);
  EXPECT_EQ(m["library"], "libfact_ops.so");
  EXPECT_EQ(m["build"]["cutlass_include_dirs"], (json{"include", "tools/util/include"}));
  EXPECT_TRUE(m["toolchain_when_written"].contains("cutlass_version"));
  ASSERT_EQ(m["ops"].size(), 2u);
  const json& op = m["ops"][1];
  EXPECT_EQ(op["name"], "gemm_" + b.id());
  EXPECT_EQ(op["op"], "fact::gemm_" + b.id());
  EXPECT_EQ(op["config_id"], b.id());
  EXPECT_EQ(op["config"], b.to_json());
  EXPECT_EQ(GemmConfig::from_json(op["config"]).id(), b.id());
  EXPECT_EQ(op["numerics"], "3xtf32");
  EXPECT_EQ(op["arch"], "sm80");
  EXPECT_EQ(op["has_bias"], true);
  EXPECT_EQ(op["cutlass_version"], "4.2.1");
  EXPECT_EQ(op["nvcc_version"], "13.0");
  EXPECT_EQ(op["kernel_source"], "kernels/" + b.id() + ".cu");
  EXPECT_EQ(op["tuned_for"][0]["problem"]["k"], 512);
  EXPECT_EQ(op["tuned_for"][0]["speedup"], 1.2);

  // The kernel's command is nvcc_command()'s, with the machine's paths as placeholders and no FACT path.
  auto args = op["nvcc_args"].get<std::vector<std::string>>();
  auto expected = nvcc_command(b, "{source}", "{output}", "{cutlass_dir}", NvccOutput::object, "{fact_include}");
  EXPECT_EQ(args, std::vector<std::string>(expected.begin() + 1, expected.end()));
  auto has = [&](const std::string& s) { return std::find(args.begin(), args.end(), s) != args.end(); };
  EXPECT_TRUE(has("-I{cutlass_dir}/include"));
  EXPECT_TRUE(has("-I{cutlass_dir}/tools/util/include"));
  EXPECT_TRUE(has("-I{fact_include}"));
  EXPECT_TRUE(has("-gencode=arch=compute_80,code=sm_80"));
  EXPECT_TRUE(has("-c"));
  EXPECT_FALSE(contains(m.dump(), fact::fact_home().string() + "/src"));
  auto a_args = m["ops"][0]["nvcc_args"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(a_args.begin(), a_args.end(), "-gencode=arch=compute_90a,code=sm_90a"), a_args.end());
}

// Two winners that are run-time variants of one sm90 kernel (swizzle 1 and 4): two ops, one kernel source and
// object; the variant's op sets its knobs and calls the shared kernel's symbols.
TEST(OpLibrary, RunTimeVariantsOfOneKernelShareItsSourceAndObject) {
  auto a = sm90_bf16();
  a.cluster = {1, 1, 1};
  auto b = a;
  b.swizzle = 4;
  b.raster_order = RasterOrder::along_n;
  ASSERT_NE(a.id(), b.id());
  ASSERT_EQ(a.kernel_id(), b.kernel_id());
  std::vector<OpLibraryEntry> entries;
  add_op_library_entries(report({row("matmul", &a, Numerics::bf16, true, Epilogue::named("none")),
                                 row("matmul_4", &b, Numerics::bf16, true, Epilogue::named("none"))}),
                         "r.json", entries);
  ASSERT_EQ(entries.size(), 2u);
  fs::path dir = fs::temp_directory_path() / "fact_test_op_library_variants";
  fs::remove_all(dir);
  auto folder = write_op_library(entries, dir);
  int sources = 0;
  for (const auto& f : fs::directory_iterator(dir / "kernels")) sources += f.path().extension() == ".cu";
  EXPECT_EQ(sources, 1);
  json m = fact::read_json_file(folder.manifest, "manifest");
  EXPECT_EQ(m["ops"][0]["kernel_object"], m["ops"][1]["kernel_object"]);
  EXPECT_EQ(m["ops"][1]["kernel_source"], "kernels/" + a.kernel_id() + ".cu");
  std::string ops = read(dir / "ops.cpp");
  EXPECT_TRUE(contains(ops, "\"gemm_" + b.id() + "(Tensor a"));
  for (const char* knob : {"  args.swizzle = 4;\n", "  args.raster = 2;\n", "  args.splits = 1;\n", "  args.reduction = 0;\n"})
    EXPECT_TRUE(contains(ops, knob)) << knob;
  EXPECT_TRUE(contains(ops, "rc = fact_" + a.kernel_id() + "_run(&args);"));
  EXPECT_FALSE(contains(ops, "fact_" + b.id() + "_run"));
  fs::remove_all(dir);
}

TEST(OpLibrary, ConfigTheGeneratorRejectsLeavesTheFolderUntouched) {
  auto bad = sm90_bf16();
  bad.alignment_d = 16;  // 32-byte vectors: wider than any operand allows
  OpLibraryEntry entry;
  entry.family = "gemm";
  entry.config = bad.to_json();
  entry.tuned_for = {json{{"problem", json::object()}}};
  std::vector<OpLibraryEntry> entries{entry};
  fs::path dir = fs::temp_directory_path() / "fact_test_op_library_rejected";
  fs::remove_all(dir);
  EXPECT_THROW(write_op_library(entries, dir), fact::Error);
  EXPECT_FALSE(fs::exists(dir / "manifest.json"));
  EXPECT_THROW(write_op_library({}, dir), fact::Error);
}

// ops.cpp as the builder compiles it (preamble, GEMM and family wrappers in one file, kernel_abi.h from the
// folder's include/) parses against the venv's torch headers; the GPU machine compiles and links it.
TEST(OpLibrary, OpsCppWithFamilyOpsParsesAgainstTorchHeaders) {
  const std::string torch_dir = torch_package_dir();
  if (torch_dir.empty()) GTEST_SKIP() << "no torch headers in " << fact::python_exe();
  auto a = sm80_3xtf32_bias();
  json rows = family_rows();
  rows.push_back(row("linear_bias", &a, Numerics::x3tf32, false, Epilogue::named("bias")));
  std::vector<OpLibraryEntry> entries;
  add_op_library_entries(report(rows), "r.json", entries);
  fs::path dir = fs::temp_directory_path() / "fact_test_op_library_parse";
  fs::remove_all(dir);
  write_op_library(entries, dir);
  auto r = parse_against_torch(torch_dir, dir / "ops.cpp", dir / "include");
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 4000);
}

}  // namespace
