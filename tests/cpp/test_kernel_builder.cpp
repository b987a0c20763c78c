#include <gtest/gtest.h>
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "realize/kernel_builder.h"

namespace fs = std::filesystem;
using fact::BuildJob;
using fact::BuildStatus;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("fact_test_kernel_builder_" + std::to_string(getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A fake compiler: logs each run, hangs on sources containing HANG, fails with 200 long nvcc-style
// errors on FAIL, else takes 0.4 s and "links" by copying the source to the output.
std::vector<std::string> fake_compiler(const fs::path& log) {
  return {"sh", "-c",
          R"(echo run >> "$3"
if grep -q HANG "$1"; then exec sleep 30; fi
if grep -q FAIL "$1"; then
  i=0; while [ $i -lt 200 ]; do
    echo "$1($i): error: identifier \"cute::Layout_$i\" is undefined in a very long template instantiation" >&2
    echo "      auto x = cute::Layout_$i{};" >&2
    echo "               ^" >&2
    i=$((i+1)); done
  exit 2
fi
sleep 0.4; cp "$1" "$2")",
          "sh", "{source}", "{output}", log.string()};
}

BuildJob job(const std::string& id, const std::string& source, const fs::path& log) {
  BuildJob j;
  j.id = id;
  j.source = source;
  j.command = fake_compiler(log);
  j.timeout = std::chrono::seconds(20);
  return j;
}

int runs_logged(const fs::path& log) {
  std::ifstream in(log);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST(KernelBuilder, BuildsInParallelThenHitsTheCache) {
  fs::path dir = fresh_dir("parallel");
  fs::path log = dir / "runs.log";
  std::vector<BuildJob> jobs;
  for (int i = 0; i < 6; ++i) jobs.push_back(job("cfg_" + std::to_string(i), "kernel " + std::to_string(i), log));

  fact::BuildOptions options;
  options.cache_dir = dir / "cache";
  options.compiler_version = "fake 1.0";
  options.workers = 6;
  std::vector<fact::BuildProgress> progress;
  options.on_progress = [&](const fact::BuildProgress& p) { progress.push_back(p); };

  auto start = std::chrono::steady_clock::now();
  auto results = fact::build_kernels(jobs, options);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 6 * 0.4 * 0.75) << "six 0.4 s compiles on six workers should overlap";

  ASSERT_EQ(results.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(results[i].id, jobs[i].id);
    EXPECT_EQ(results[i].status, BuildStatus::built) << results[i].diagnostics;
    EXPECT_EQ(read(results[i].library), jobs[i].source);
    EXPECT_EQ(results[i].library.parent_path().filename(), results[i].cache_key);
    EXPECT_GT(results[i].seconds, 0.3);
  }
  EXPECT_EQ(runs_logged(log), 6);
  ASSERT_EQ(progress.size(), 6u);
  for (size_t i = 0; i < progress.size(); ++i) {
    EXPECT_EQ(progress[i].done, i + 1);
    EXPECT_EQ(progress[i].total, 6u);
  }

  // The same candidates again: nothing runs.
  progress.clear();
  auto again = fact::build_kernels(jobs, options);
  EXPECT_EQ(runs_logged(log), 6);
  EXPECT_EQ(progress.size(), 6u);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(again[i].status, BuildStatus::cached);
    EXPECT_EQ(again[i].library, results[i].library);
    EXPECT_LT(again[i].seconds, 0.1);
  }

  // A new compiler version invalidates the cache.
  options.compiler_version = "fake 2.0";
  auto rebuilt = fact::build_kernels({jobs[0]}, options);
  EXPECT_EQ(rebuilt[0].status, BuildStatus::built);
  EXPECT_NE(rebuilt[0].cache_key, results[0].cache_key);
  EXPECT_EQ(runs_logged(log), 7);
}

TEST(KernelBuilder, OneFailingAndOneHangingCandidateDoNotStopTheOthers) {
  fs::path dir = fresh_dir("isolation");
  fs::path log = dir / "runs.log";
  std::vector<BuildJob> jobs = {job("good_a", "a", log), job("broken", "FAIL", log), job("good_b", "b", log),
                                job("hangs", "HANG", log), job("good_c", "c", log)};
  jobs[3].timeout = std::chrono::seconds(1);
  BuildJob missing = job("no_compiler", "x", log);
  missing.command = {"/nonexistent/nvcc", "{source}"};
  jobs.push_back(missing);

  fact::BuildOptions options;
  options.cache_dir = dir / "cache";
  options.workers = 3;
  options.max_diagnostics_chars = 1000;
  auto results = fact::build_kernels(jobs, options);

  ASSERT_EQ(results.size(), 6u);
  for (int i : {0, 2, 4}) {
    EXPECT_EQ(results[i].status, BuildStatus::built) << results[i].id << ": " << results[i].diagnostics;
    EXPECT_TRUE(fs::exists(results[i].library));
  }

  const auto& broken = results[1];
  EXPECT_EQ(broken.status, BuildStatus::failed);
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_TRUE(broken.library.empty());
  EXPECT_LE(broken.diagnostics.size(), 1000u);
  EXPECT_NE(broken.diagnostics.find("(0): error: identifier \"cute::Layout_0\""), std::string::npos) << broken.diagnostics;
  EXPECT_NE(broken.diagnostics.find("auto x = cute::Layout_0{};"), std::string::npos) << "keeps the source line";
  EXPECT_EQ(broken.diagnostics.find("Layout_150"), std::string::npos) << "drops later errors";

  const auto& hangs = results[3];
  EXPECT_EQ(hangs.status, BuildStatus::timeout);
  EXPECT_EQ(hangs.exit_code, -1);
  EXPECT_NE(hangs.diagnostics.find("killed after 1 s"), std::string::npos) << hangs.diagnostics;
  EXPECT_LT(hangs.seconds, 5.0);

  EXPECT_EQ(results[5].status, BuildStatus::failed);
  EXPECT_NE(results[5].diagnostics.find("/nonexistent/nvcc"), std::string::npos) << results[5].diagnostics;

  // Failures leave no cache entry and no scratch folder, so a retry compiles them again.
  EXPECT_FALSE(fs::exists(options.cache_dir / broken.cache_key));
  EXPECT_FALSE(fs::exists(options.cache_dir / hangs.cache_key));
  for (const auto& entry : fs::directory_iterator(options.cache_dir))
    EXPECT_NE(entry.path().filename().string().rfind(".tmp-", 0), 0u) << entry.path();
  auto retry = fact::build_kernels({jobs[1]}, options);
  EXPECT_EQ(retry[0].status, BuildStatus::failed);
}

TEST(KernelBuilder, IdenticalJobsInOneBatchCompileOnce) {
  fs::path dir = fresh_dir("duplicates");
  fs::path log = dir / "runs.log";
  fact::BuildOptions options;
  options.cache_dir = dir / "cache";
  auto results = fact::build_kernels({job("first", "same", log), job("second", "same", log)}, options);
  EXPECT_EQ(runs_logged(log), 1);
  EXPECT_EQ(results[0].status, BuildStatus::built);
  EXPECT_EQ(results[1].status, BuildStatus::cached);
  EXPECT_EQ(results[1].id, "second");
  EXPECT_EQ(results[0].library, results[1].library);
}

// A job with a link step keeps the compiled object in the cache beside the library; the link is no compile.
TEST(KernelBuilder, ALinkStepKeepsTheObjectInTheCache) {
  fs::path dir = fresh_dir("link");
  fs::path log = dir / "runs.log", links = dir / "links.log";
  fact::BuildOptions options;
  options.cache_dir = dir / "cache";
  BuildJob j = job("linked", "kernel source", log);
  j.link_command = {"sh", "-c", "echo link >> \"$3\"; cat \"$1\" > \"$2\"", "sh", "{object}", "{output}",
                    links.string()};
  auto first = fact::build_kernels({j}, options);
  ASSERT_TRUE(first[0].ok()) << first[0].diagnostics;
  EXPECT_EQ(first[0].status, BuildStatus::built);
  EXPECT_EQ(first[0].object.filename(), "kernel.o");
  EXPECT_EQ(read(first[0].object), "kernel source");
  EXPECT_EQ(read(first[0].library), "kernel source");
  auto again = fact::build_kernels({j}, options);
  EXPECT_EQ(again[0].status, BuildStatus::cached);
  EXPECT_EQ(again[0].object, first[0].object);
  EXPECT_EQ(runs_logged(log), 1);
  EXPECT_EQ(runs_logged(links), 1);

  BuildJob unlinked = job("linked", "kernel source", log);  // the same compile without the link: its own entry
  EXPECT_NE(fact::build_cache_key(unlinked, ""), fact::build_cache_key(j, ""));
  j.link_command = {"sh", "-c", "echo 'ld: undefined reference to fact_x' >&2; exit 1"};
  j.source = "another source";
  auto failed = fact::build_kernels({j}, options);
  EXPECT_EQ(failed[0].status, BuildStatus::failed);
  EXPECT_NE(failed[0].diagnostics.find("linking the compiled object failed"), std::string::npos);
  EXPECT_NE(failed[0].diagnostics.find("undefined reference to fact_x"), std::string::npos);
}

TEST(KernelBuilder, CacheKeyCoversSourceCommandAndCompiler) {
  BuildJob a = job("a", "text", "/tmp/log");
  BuildJob b = a;
  b.id = "renamed";
  EXPECT_EQ(fact::build_cache_key(a, "v1"), fact::build_cache_key(b, "v1")) << "the id is a name, not content";
  b.source = "text2";
  EXPECT_NE(fact::build_cache_key(a, "v1"), fact::build_cache_key(b, "v1"));
  b = a;
  b.command.back() = "/tmp/other";
  EXPECT_NE(fact::build_cache_key(a, "v1"), fact::build_cache_key(b, "v1"));
  EXPECT_NE(fact::build_cache_key(a, "v1"), fact::build_cache_key(a, "v2"));
  b = a;
  b.command = {"x", "yz"};
  BuildJob c = a;
  c.command = {"xy", "z"};
  EXPECT_NE(fact::build_cache_key(b, ""), fact::build_cache_key(c, ""));
  EXPECT_EQ(fact::build_cache_key(a, "v1").size(), 64u);
}

TEST(KernelBuilder, TrimDiagnosticsKeepsErrorsOrTheTail) {
  std::string no_errors;
  for (int i = 0; i < 100; ++i) no_errors += "line " + std::to_string(i) + "\n";
  std::string tail = fact::trim_diagnostics(no_errors, 10000);
  EXPECT_EQ(tail.find("line 79\n"), std::string::npos);
  EXPECT_NE(tail.find("line 80"), std::string::npos);
  EXPECT_NE(tail.find("line 99"), std::string::npos);

  std::string errors = "warning: fine\nfoo.cu(1): error: first\n  src\n  ^\nnoise\n";
  for (int i = 0; i < 10; ++i) errors += "foo.cu: error: more " + std::to_string(i) + "\n";
  std::string kept = fact::trim_diagnostics(errors, 10000);
  EXPECT_EQ(kept.rfind("foo.cu(1): error: first\n  src\n  ^", 0), 0u) << kept;
  EXPECT_EQ(kept.find("warning"), std::string::npos);
  EXPECT_NE(kept.find("(6 more error lines)"), std::string::npos) << kept;

  std::string huge_line = "error: " + std::string(100000, 'x');
  std::string capped = fact::trim_diagnostics(huge_line, 500);
  EXPECT_LE(capped.size(), 500u);
  EXPECT_EQ(capped.rfind("error: xxx", 0), 0u);
}

TEST(KernelBuilder, UnusableCacheDirectoryIsAnError) {
  fs::path dir = fresh_dir("badcache");
  std::ofstream(dir / "file") << "x";
  fact::BuildOptions options;
  options.cache_dir = dir / "file" / "cache";
  try {
    fact::build_kernels({job("a", "a", dir / "log")}, options);
    FAIL() << "expected an error";
  } catch (const fact::Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "file" / "cache").string()), std::string::npos) << e.what();
  }
}

// The one real compile: a tiny host-only .cu through nvcc into a library that dlopen can load.
TEST(KernelBuilderNvcc, CompilesATinySharedLibrary) {
  const fs::path nvcc = "/usr/local/cuda/bin/nvcc";
  if (!fs::exists(nvcc)) GTEST_SKIP() << "no nvcc at " << nvcc;
  fs::path dir = fresh_dir("nvcc");
  BuildJob j;
  j.id = "probe";
  j.source = "extern \"C\" int fact_probe_answer(void) { return 42; }\n";
  j.command = {nvcc.string(), "-shared", "-Xcompiler", "-fPIC", "-o", "{output}", "{source}"};
  j.timeout = std::chrono::seconds(300);
  fact::BuildOptions options;
  options.cache_dir = dir / "cache";
  options.compiler_version = fact::compiler_version({nvcc.string(), "--version"});
  EXPECT_NE(options.compiler_version.find("release"), std::string::npos) << options.compiler_version;
  auto r = fact::build_kernels({j}, options);
  ASSERT_EQ(r[0].status, BuildStatus::built) << r[0].diagnostics;
  void* handle = dlopen(r[0].library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto fn = reinterpret_cast<int (*)()>(dlsym(handle, "fact_probe_answer"));
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ(fn(), 42);
  dlclose(handle);
}
