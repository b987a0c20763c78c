// report.json's "process" block: every Python start through run_process and every kernel compile is counted.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "compose/optimize_report.h"
#include "core/paths.h"
#include "core/process.h"
#include "core/process_counts.h"
#include "realize/kernel_builder.h"

namespace fs = std::filesystem;

TEST(ProcessCounts, JsonHasEveryCountAndRoundedSeconds) {
  fact::ProcessCounts a;
  a.python_starts = 2;
  a.python_starts_by_use = {{"fact.trace", 1}, {"python -c", 1}};
  a.fact_starts = 1;
  a.compiles = {{"cfgA", 1}, {"cfgB", 0}};
  a.step_seconds = {{"discover", 1.2345}};
  auto j = a.to_json();
  EXPECT_EQ(j["python_starts"], 2);
  EXPECT_EQ(j["python_starts_by_use"]["fact.trace"], 1);
  EXPECT_EQ(j["fact_starts"], 1);
  EXPECT_EQ(j["compiles"], (nlohmann::json{{"cfgA", 1}, {"cfgB", 0}}));
  EXPECT_DOUBLE_EQ(j["step_seconds"]["discover"].get<double>(), 1.23);
  EXPECT_TRUE(fact::ProcessCounts{}.to_json()["compiles"].is_object());  // {} rather than null when nothing was built
}

TEST(ProcessCounts, RunningPythonCountsOneStartByModule) {
  if (!fs::exists(fact::python_exe())) GTEST_SKIP() << "no Python at " << fact::python_exe();
  auto before = fact::process_counts();
  fact::run_process({fact::python_exe(), "-c", "pass"});
  fact::run_process({"sh", "-c", "true"});  // not Python: not counted
  auto after = fact::process_counts();
  EXPECT_EQ(after.python_starts, before.python_starts + 1);
  EXPECT_EQ(after.python_starts_by_use["python -c"], before.python_starts_by_use["python -c"] + 1);
  EXPECT_EQ(after.fact_starts, before.fact_starts);
}

TEST(ProcessCounts, KernelBuilderCountsCompilerRunsAndCacheHits) {
  fs::path cache = fs::temp_directory_path() / ("fact_test_process_counts_" + std::to_string(getpid()));
  fs::remove_all(cache);
  fact::BuildJob job;
  job.id = "counted_kernel_" + std::to_string(getpid());
  job.source = "int x;\n";
  job.command = {"sh", "-c", "cp \"$1\" \"$2\"", "sh", "{source}", "{output}"};
  fact::BuildOptions options;
  options.cache_dir = cache;
  ASSERT_TRUE(fact::build_kernels({job}, options)[0].ok());
  EXPECT_EQ(fact::process_counts().compiles[job.id], 1);
  ASSERT_TRUE(fact::build_kernels({job}, options)[0].ok());  // a cache hit: listed, not compiled again
  EXPECT_EQ(fact::process_counts().compiles[job.id], 1);
  fs::remove_all(cache);
}

TEST(ProcessCounts, ReportMdLineSumsTheCompiles) {
  nlohmann::json p = {{"python_starts", 1},
                      {"fact_starts", 0},
                      {"compiles", {{"norm_a", 1}, {"gemm_b", 0}}},
                      {"step_seconds", {{"discover", 1.0}, {"total", 2.5}}}};
  EXPECT_EQ(fact::compose::process_line(p),
            "Process: Python started 1 time(s), `fact` 0 time(s); 1 kernel compile(s) of 2 kernel(s) (at most 1 per "
            "kernel); 2.5 s in all.");
}
