// One build: the tuner and the op library build a kernel with the same job, so the op library links the object
// the tuner left in the kernel cache and a winner is compiled once (a stub nvcc stands in for the real one).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>

#include "core/arch_spec.h"
#include "core/files.h"
#include "core/process_counts.h"
#include "core/sha256.h"
#include "discover/pattern_registry.h"
#include "discover/plan.h"
#include "ir/ir_io.h"
#include "realize/kernel_build_job.h"
#include "realize/op_library.h"
#include "realize/op_library_build.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace fact;
using namespace fact::realize;

namespace {

// Every family match of the MiniGPT plan as a tune report row whose winner is the family's top-ranked config.
json minigpt_rows(std::vector<FamilyCandidate>* tuned = nullptr) {
  const auto& ops = ir::OpTable::builtin();
  auto graph = ir::load_graph(std::string(FACT_TEST_DATA) + "/ir/minigpt_block.json", ops);
  auto plan = discover::make_plan(graph, discover::PatternRegistry::builtin(), ops, ArchSpec::builtin("sm90"),
                                  Numerics::tf32);
  json rows = json::array();
  for (const auto& e : plan.entries) {
    const KernelFamily* family = kernel_family_for(e.match);
    if (!family) continue;
    json problem = family->problem_from_match(e.match, plan.graph, Numerics::tf32, Arch::sm90);
    FamilyCandidate c = family->candidates(problem, 1).ranked.at(0);
    if (tuned) tuned->push_back(c);
    rows.push_back({{"pattern", e.match.rule}, {"anchor", e.match.anchor}, {"family", family->name()},
                    {"status", "tuned"}, {"problem", problem}, {"config", c.config}, {"winner", c.config_id}});
  }
  return rows;
}

// Sets an environment variable for one test and puts the old value back.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) old = v;
    setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { old ? setenv(name.c_str(), old->c_str(), 1) : unsetenv(name.c_str()); }
};

}  // namespace

TEST(KernelBuildJob, TheTunerAndTheOpLibraryBuildEveryWinnerUnderOneCacheKey) {
  std::vector<FamilyCandidate> tuned;
  json rows = minigpt_rows(&tuned);
  ASSERT_GE(tuned.size(), 3u);  // GEMMs, attention, LayerNorm
  std::vector<OpLibraryEntry> entries;
  add_op_library_entries({{"format", "fact-tune-report"}, {"rows", rows}}, "r.json", entries);
  fs::path dir = fs::temp_directory_path() / ("fact_test_kernel_build_job_" + std::to_string(getpid()));
  fs::remove_all(dir);
  auto folder = write_op_library(entries, dir);
  for (const auto& c : tuned) {
    std::string key = build_cache_key(kernel_build_job(c), "v");
    // A warm tune rebuilds the winner from its recorded config; the op library renders it from the report's config.
    const KernelFamily* family = nullptr;
    for (const auto& e : entries)
      if (e.config_id == c.config_id) family = kernel_family_named(e.family);
    ASSERT_NE(family, nullptr) << c.config_id;
    EXPECT_EQ(build_cache_key(kernel_build_job(family->candidate_from_config(c.config)), "v"), key) << c.config_id;
    bool in_library = false;
    for (const auto& k : folder.kernels)
      if (k.config_id == c.config_id) in_library = build_cache_key(kernel_build_job(k), "v") == key;
    EXPECT_TRUE(in_library) << c.config_id << " is built under another key by the op library";
  }
  EXPECT_FALSE(kernel_build_job(tuned[0]).link_command.empty());  // an object in the cache, then the library
  fs::remove_all(dir);
}

TEST(KernelBuildJob, TheOpLibraryLinksTheTunersCachedObjectAndCompilesOnlyWhatTheCacheLacks) {
  fs::path work = fs::temp_directory_path() / ("fact_test_one_build_" + std::to_string(getpid()));
  fs::remove_all(work);
  fs::create_directories(work);
  fs::path stub = work / "nvcc", calls = work / "nvcc.calls";
  write_file_atomic(stub, "#!/bin/sh\n"
                          "if [ \"$1\" = --version ]; then echo 'Cuda compilation tools, release 13.0, V13.0.0'; exit 0; fi\n"
                          "echo \"$@\" >> " + calls.string() + "\n"
                          "out=; prev=; for a in \"$@\"; do [ \"$prev\" = -o ] && out=$a; prev=$a; done\n"
                          "echo built > \"$out\"\n");
  fs::permissions(stub, fs::perms::owner_all);
  ScopedEnv nvcc("FACT_NVCC", stub.string());
  ScopedEnv cache("FACT_KERNEL_CACHE", (work / "cache").string());

  std::vector<FamilyCandidate> tuned;
  json rows = minigpt_rows(&tuned);
  rows = json::array({rows.at(0)});  // one winner is enough
  std::vector<OpLibraryEntry> entries;
  add_op_library_entries({{"format", "fact-tune-report"}, {"rows", rows}}, "r.json", entries);
  auto folder = write_op_library(entries, work / "ops");
  const std::string id = folder.kernels.at(0).config_id;
  auto compiles = [&] { return process_counts().compiles[id]; };
  int before = compiles();

  // The tuner builds the candidate: one compile, object and library in the cache.
  auto tuner = build_kernels({kernel_build_job(tuned.at(0))}, kernel_build_options());
  ASSERT_TRUE(tuner.at(0).ok()) << tuner.at(0).diagnostics;
  ASSERT_TRUE(fs::exists(tuner.at(0).object));
  EXPECT_EQ(compiles(), before + 1);

  // The op library takes that object: no compile.
  std::ostringstream log;
  json listing = prebuild_kernel_objects(folder, 0, log);
  EXPECT_EQ(compiles(), before + 1) << log.str();
  EXPECT_EQ(listing["objects"][id]["object"], tuner.at(0).object.string());
  EXPECT_EQ(listing["objects"][id]["source_sha256"],
            sha256_hex(read_text_file(work / "ops" / "kernels" / (folder.kernels.at(0).kernel_id() + ".cu"), "kernel")));
  EXPECT_EQ(read_json_file(work / "ops" / kPrebuiltObjectsFile, "listing"), listing);
  EXPECT_NE(log.str().find("1 from the kernel cache, 0 compiled now"), std::string::npos) << log.str();

  // A fresh machine with a warm tuning database: the cache lacks the object, so it is compiled once and kept.
  ScopedEnv fresh("FACT_KERNEL_CACHE", (work / "fresh-cache").string());
  prebuild_kernel_objects(folder, 0, log);
  prebuild_kernel_objects(folder, 0, log);
  EXPECT_EQ(compiles(), before + 2);
  fs::remove_all(work);
}

// The production commands with the real nvcc: the kernel compiles to an object (device code for sm_90a inside) and
// a host link makes the library the runner loads.
TEST(KernelBuildJobNvcc, ProductionCommandsCompileAnObjectAndLinkALoadableLibrary) {
  if (!fs::exists("/usr/local/cuda/bin/nvcc") && !std::getenv("FACT_NVCC")) GTEST_SKIP() << "no nvcc";
  fs::path cache = fs::temp_directory_path() / ("fact_test_build_job_nvcc_" + std::to_string(getpid()));
  fs::remove_all(cache);
  FamilyCandidate c;
  c.config_id = "probe_object_link";
  c.arch = Arch::sm90;
  c.kernel.text = "__global__ void fact_probe_kernel(int* out) { *out = 42; }\n"
                  "extern \"C\" int fact_probe_answer(void) { return 42; }\n";
  BuildOptions options = kernel_build_options();
  options.cache_dir = cache;
  auto r = build_kernels({kernel_build_job(c)}, options);
  ASSERT_EQ(r[0].status, BuildStatus::built) << r[0].diagnostics;
  EXPECT_TRUE(fs::exists(r[0].object));
  void* handle = dlopen(r[0].library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto fn = reinterpret_cast<int (*)()>(dlsym(handle, "fact_probe_answer"));
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ(fn(), 42);
  dlclose(handle);
  fs::remove_all(cache);
}
