// `fact bench` on a CPU: finding problems in a KernelBench layout, reading optimize's results, the
// per-level metrics against hand-computed values, and resumption with a fake `fact optimize`.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/problem_result.h"
#include "bench/suite_metrics.h"
#include "bench/suite_problems.h"
#include "bench/suite_report.h"
#include "bench/suite_resume.h"
#include "bench/suite_runner.h"
#include "core/error.h"
#include "core/files.h"
#include "core/gpu_devices.h"

namespace fs = std::filesystem;
using namespace fact::bench;
using nlohmann::json;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("fact_test_bench_" + std::to_string(getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

const char* kProblem =
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    "def get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n";

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::vector<std::string> ids(const std::vector<SuiteProblem>& ps) {
  std::vector<std::string> out;
  for (const auto& p : ps) out.push_back(p.id());
  return out;
}

std::string error_of(const fs::path& dir) {
  try {
    find_problems(dir);
  } catch (const fact::Error& e) {
    return e.what();
  }
  return "";
}

ProblemResult result(const std::string& level, const std::string& name, ProblemStatus status,
                     std::optional<double> eager = std::nullopt, std::optional<double> composed = std::nullopt,
                     std::optional<double> compile = std::nullopt) {
  ProblemResult r;
  r.level = level;
  r.name = name;
  r.id = level + "/" + name;
  r.status = status;
  r.eager_ms = eager;
  r.composed_ms = composed;
  r.compile_default_ms = compile;
  return r;
}

}  // namespace

TEST(BenchProblems, FindsLevelFoldersInNaturalOrderAndSkipsNonProblems) {
  fs::path dir = fresh_dir("layout");
  for (auto name : {"10_gemm.py", "2_relu.py", "a_norm.py"}) write(dir / "level1" / name, kProblem);
  write(dir / "level2" / "block.py", kProblem);
  write(dir / "level10" / "big.py", kProblem);
  write(dir / "level1" / "__init__.py", "");        // Python's own file
  write(dir / "level1" / "README.md", "notes");      // not .py
  write(dir / "scratch" / "not_a_level.py", "x=1");  // not a level folder: not looked at
  write(dir / "helper.py", "x=1");                   // beside the levels: not looked at
  auto ps = find_problems(dir);
  EXPECT_EQ(ids(ps), (std::vector<std::string>{"level1/2_relu", "level1/10_gemm", "level1/a_norm", "level2/block",
                                               "level10/big"}));
  EXPECT_EQ(ps[0].level_number, 1);
  EXPECT_EQ(ps.back().level_number, 10);
  EXPECT_EQ(ps[0].path, dir / "level1" / "2_relu.py");
  // One level folder on its own is a suite of that level.
  EXPECT_EQ(ids(find_problems(dir / "level2")), (std::vector<std::string>{"level2/block"}));
}

TEST(BenchProblems, BadFilesAndEmptyFoldersAreClearErrors) {
  fs::path dir = fresh_dir("bad");
  write(dir / "level1" / "good.py", kProblem);
  write(dir / "level1" / "helper.py", "def get_inputs():\n    return []\n");
  write(dir / "level1" / "nested.py", "if True:\n    class Model: pass\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n");
  std::string e = error_of(dir);
  EXPECT_NE(e.find("2 file(s)"), std::string::npos) << e;
  EXPECT_NE(e.find("helper.py: not a problem file: no top-level `class Model` or `def get_init_inputs()`"),
            std::string::npos) << e;
  EXPECT_NE(e.find("nested.py: not a problem file: no top-level `class Model`"), std::string::npos) << e;
  EXPECT_NE(e.find("move them out"), std::string::npos) << e;
  EXPECT_EQ(e.find("good.py"), std::string::npos) << e;

  fs::path empty = fresh_dir("empty");
  write(empty / "docs" / "x.py", kProblem);
  EXPECT_NE(error_of(empty).find("holds no problem files"), std::string::npos);
  EXPECT_NE(error_of(empty).find("DIR/level1/NAME.py"), std::string::npos);
  EXPECT_NE(error_of(empty / "missing").find("does not exist"), std::string::npos);
  EXPECT_EQ(problem_file_defect(kProblem), "");
}

TEST(BenchResult, ReadsTheOptimizeFolder) {
  SuiteProblem p{"level1", 1, "gemm", "/x/level1/gemm.py"};
  fs::path dir = fresh_dir("read");

  EXPECT_EQ(read_problem_result(p, dir / "none").status, ProblemStatus::failed);
  EXPECT_NE(read_problem_result(p, dir / "none").reason.find("no report.json"), std::string::npos);

  write(dir / "cpu" / "report.json", R"({"numerics": "3xtf32", "gpu": false, "needs_gpu": "no CUDA GPU on this machine"})");
  auto cpu = read_problem_result(p, dir / "cpu");
  EXPECT_EQ(cpu.status, ProblemStatus::not_measured);
  EXPECT_NE(cpu.reason.find("no CUDA GPU"), std::string::npos);
  EXPECT_FALSE(cpu.measured());

  // Today's layout: report.json without "e2e", e2e.json beside it, rel errors per trial, no compile times.
  write(dir / "today" / "report.json", R"({"numerics": "tf32", "gpu": true, "steps": []})");
  write(dir / "today" / "e2e.json", R"({"numerics": "tf32", "correct": true, "eager_ms": 3.0, "composed_ms": 2.0,
        "trials": [{"rel_err_composed": 1e-4, "rel_err_original": 2e-4}, {"rel_err_composed": 3e-4, "rel_err_original": 1e-4}]})");
  auto today = read_problem_result(p, dir / "today");
  EXPECT_EQ(today.status, ProblemStatus::correct);
  EXPECT_DOUBLE_EQ(*today.speedup_eager(), 1.5);
  EXPECT_FALSE(today.compile_default_ms) << "no compile time: not measured, never 0 or eager";
  EXPECT_FALSE(today.speedup_compile());
  EXPECT_DOUBLE_EQ(*today.rel_err_composed, 3e-4);
  EXPECT_DOUBLE_EQ(*today.rel_err_original, 2e-4);
  EXPECT_TRUE(to_json(today)["speedup_compile"].is_null());

  // The compose contract: report.json's own "e2e" wins over an e2e.json beside it; null compile = not run.
  write(dir / "contract" / "report.json", R"({"numerics": "tf32", "e2e": {"correct": true, "eager_ms": 4.0,
        "composed_ms": 2.0, "compile_default_ms": 3.0, "compile_max_autotune_ms": null, "numerics": "tf32",
        "rel_err_composed": 1e-5, "rel_err_original": 1e-5},
        "graph_ops": 9,
        "patterns": [{"rule": "gemm", "accepted": true, "ops": 3}, {"rule": "softmax", "accepted": true, "ops": 1},
                     {"rule": "layer_norm", "accepted": false, "ops": 4}]})");
  write(dir / "contract" / "e2e.json", R"({"correct": false})");
  auto contract = read_problem_result(p, dir / "contract");
  EXPECT_EQ(contract.status, ProblemStatus::correct);
  EXPECT_DOUBLE_EQ(*contract.speedup_compile(), 1.5);
  EXPECT_FALSE(contract.speedup_compile_max_autotune());
  EXPECT_EQ(contract.fact_patterns, 2) << "accepted pattern rows of report.json";
  EXPECT_FALSE(today.fact_patterns) << "no pattern rows: unknown, not 0";
  EXPECT_EQ(contract.fact_ops, 4) << "graph ops of the accepted patterns only";
  EXPECT_EQ(contract.graph_ops, 9);
  EXPECT_EQ(problem_result_from_json(to_json(contract)).fact_ops, 4) << "round trip";
  EXPECT_FALSE(today.graph_ops) << "not reported: unknown";

  write(dir / "wrong" / "report.json", R"({"numerics": "tf32", "steps": []})");
  write(dir / "wrong" / "e2e.json", R"({"correct": false, "eager_ms": 1.0, "composed_ms": 0.5,
        "trials": [{"max_abs_diff": 0.25, "rel_err_composed": 0.1, "rel_err_original": 1e-6}]})");
  auto wrong = read_problem_result(p, dir / "wrong");
  EXPECT_EQ(wrong.status, ProblemStatus::incorrect);
  EXPECT_NE(wrong.reason.find("max abs diff 0.25"), std::string::npos) << wrong.reason;

  write(dir / "noe2e" / "report.json", R"({"numerics": "tf32", "steps": [{"step": "tune", "ok": false, "log": "t.log"}]})");
  auto noe2e = read_problem_result(p, dir / "noe2e");
  EXPECT_EQ(noe2e.status, ProblemStatus::failed);
  EXPECT_NE(noe2e.reason.find("tune failed (see t.log)"), std::string::npos) << noe2e.reason;

  auto round = problem_result_from_json(to_json(contract));
  EXPECT_EQ(to_json(round), to_json(contract));
}

TEST(BenchMetrics, FastPGeomeanAndFractionsByHand) {
  std::vector<ProblemResult> rs = {
      result("level1", "a", ProblemStatus::correct, 3.0, 1.0, 2.0),   // 3.0x eager, 2.0x compile
      result("level1", "b", ProblemStatus::correct, 1.2, 1.0),        // 1.2x, compile not measured
      result("level1", "c", ProblemStatus::incorrect, 4.0, 1.0),      // fast but wrong: counts nowhere
      result("level1", "d", ProblemStatus::failed),
      result("level1", "e", ProblemStatus::not_measured),             // left out of every fraction
      result("level2", "f", ProblemStatus::correct, 1.0, 2.0, 0.5),   // 0.5x eager, 0.25x compile
      result("level2", "g", ProblemStatus::not_run),
  };
  auto ms = suite_metrics(rs);
  ASSERT_EQ(ms.size(), 3u);
  const LevelMetrics& l1 = ms[0];
  EXPECT_EQ(l1.level, "level1");
  EXPECT_EQ(l1.problems, 5);
  EXPECT_EQ(l1.measured, 4);
  EXPECT_EQ(l1.correct, 2);
  EXPECT_EQ(l1.incorrect, 1);
  EXPECT_EQ(l1.failed, 1);
  EXPECT_EQ(l1.not_measured, 1);
  EXPECT_EQ(l1.compile_measured, 1);
  EXPECT_DOUBLE_EQ(*l1.correct_fraction, 0.5);
  EXPECT_DOUBLE_EQ(*l1.fast_p[0].vs_eager, 2.0 / 4);  // a (3.0) and b (1.2) > 1.0
  EXPECT_DOUBLE_EQ(*l1.fast_p[1].vs_eager, 1.0 / 4);  // a only
  EXPECT_DOUBLE_EQ(*l1.fast_p[2].vs_eager, 1.0 / 4);  // 3.0 > 2.0
  EXPECT_DOUBLE_EQ(*l1.fast_p[0].vs_compile, 1.0 / 4);
  EXPECT_DOUBLE_EQ(*l1.fast_p[2].vs_compile, 0.0);    // 2.0 is not > 2.0
  EXPECT_NEAR(*l1.geomean_speedup_eager, std::sqrt(3.0 * 1.2), 1e-12);
  EXPECT_EQ(l1.geomean_count_eager, 2);
  EXPECT_NEAR(*l1.geomean_speedup_compile, 2.0, 1e-12);

  const LevelMetrics& l2 = ms[1];
  EXPECT_EQ(l2.measured, 1);
  EXPECT_DOUBLE_EQ(*l2.fast_p[0].vs_eager, 0.0);
  EXPECT_NEAR(*l2.geomean_speedup_eager, 0.5, 1e-12);

  const LevelMetrics& all = ms[2];
  EXPECT_EQ(all.level, "all");
  EXPECT_EQ(all.problems, 7);
  EXPECT_EQ(all.measured, 5);
  EXPECT_EQ(all.not_measured, 2);
  EXPECT_DOUBLE_EQ(*all.correct_fraction, 3.0 / 5);
  EXPECT_DOUBLE_EQ(*all.fast_p[0].vs_eager, 2.0 / 5);
  EXPECT_NEAR(*all.geomean_speedup_eager, std::cbrt(3.0 * 1.2 * 0.5), 1e-12);
  EXPECT_NEAR(*all.geomean_speedup_compile, std::sqrt(2.0 * 0.25), 1e-12);

  // Nothing measured (a CPU run): no fraction is made up.
  auto cpu = level_metrics("level1", {result("level1", "x", ProblemStatus::not_measured)});
  EXPECT_FALSE(cpu.correct_fraction);
  EXPECT_FALSE(cpu.fast_p[0].vs_eager);
  EXPECT_FALSE(cpu.geomean_speedup_eager);
  json j = to_json(cpu);
  EXPECT_TRUE(j["fast_p"]["fast_1.5"]["vs_eager"].is_null());

  rs[0].compile_reduce_overhead_ms = 1.5;  // torch.compile's CUDA-graph mode, shown beside default, not in the metrics
  EXPECT_EQ(problem_result_from_json(to_json(rs[0])).compile_reduce_overhead_ms, 1.5);
  std::string md = suite_markdown(suite_json({"bench/problems", "sm90", "tf32", 2, 1, {}}, rs));
  EXPECT_NE(md.find("| level1 | 5 | 4 | 2 (0.50) | 1 | 1 | 0.50 | 0.25 | 0.25 | 1.90x |"), std::string::npos) << md;
  EXPECT_NE(md.find("2 problem(s) not measured"), std::string::npos) << md;
  EXPECT_NE(md.find("| level1/a | correct | — | 3 | 1 | 3.00x | 2 | 2.00x | 1.5 |"), std::string::npos) << md;
  EXPECT_NEAR(*suite_metrics(rs)[0].geomean_speedup_compile, 2.0, 1e-12);
}

TEST(BenchGpus, VisibleDevicesList) {
  EXPECT_EQ(fact::parse_visible_devices("0,1, 3"), (std::vector<std::string>{"0", "1", "3"}));
  EXPECT_EQ(fact::parse_visible_devices(""), (std::vector<std::string>{}));
  EXPECT_EQ(fact::parse_visible_devices("2,-1,3"), (std::vector<std::string>{"2"}));
  EXPECT_EQ(fact::parse_visible_devices("GPU-abc"), (std::vector<std::string>{"GPU-abc"}));
}

// A stand-in for `fact optimize`: logs each call (with its CUDA_VISIBLE_DEVICES), then acts as the problem
// file says: "# fake_e2e: JSON" writes report.json + that e2e.json, "# fake_crash" exits 1 with no report,
// "# fake_abort" dies of SIGABRT (std::terminate), "# fake_stopped" is stopped from outside (SIGTERM).
// It also leaves the GPU lock it was given (FACT_GPU_LOCK) in gpu_lock.txt.
class BenchResume : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fresh_dir("resume");
    calls = dir / "calls.txt";
    fake = dir / "fake_optimize.sh";
    write(fake, "#!/bin/sh\nproblem=$1; out=$3\necho \"$problem gpu=$CUDA_VISIBLE_DEVICES\" >> " + calls.string() + "\n"
                "grep -q '^# fake_crash' \"$problem\" && { echo 'boom: crashed' >&2; exit 1; }\n"
                "grep -q '^# fake_abort' \"$problem\" && { echo 'terminate called' >&2; kill -ABRT $$; }\n"
                "grep -q '^# fake_stopped' \"$problem\" && kill -TERM $$\n"
                "grep -q '^# fake_sleep' \"$problem\" && sleep 2\n"
                "mkdir -p \"$out\"\n"
                "echo \"$FACT_GPU_LOCK\" > \"$out/gpu_lock.txt\"\n"
                "grep '^# fake_e2e: ' \"$problem\" | sed 's/^# fake_e2e: //' > \"$out/e2e.json\"\n"
                "echo '{\"numerics\": \"tf32\", \"gpu\": true, \"steps\": []}' > \"$out/report.json\"\n");
    fs::permissions(fake, fs::perms::owner_all);
    suite = dir / "suite";
    write(suite / "level1" / "fast.py", std::string(kProblem) + "# fake_e2e: {\"correct\": true, \"eager_ms\": 2, \"composed_ms\": 1}\n");
    write(suite / "level1" / "slow.py", std::string(kProblem) + "# fake_e2e: {\"correct\": true, \"eager_ms\": 1, \"composed_ms\": 2}\n");
    write(suite / "level2" / "crash.py", std::string(kProblem) + "# fake_crash\n");
    opts.out = dir / "out";
    opts.optimize_command = {fake.string()};
    opts.top = 2;
    opts.numerics = "tf32";
  }
  std::vector<std::string> call_log() {
    std::vector<std::string> lines;
    std::ifstream in(calls);
    for (std::string l; std::getline(in, l);) lines.push_back(fs::path(l.substr(0, l.find(' '))).filename().string() + l.substr(l.find(' ')));
    std::sort(lines.begin(), lines.end());
    fs::remove(calls);
    return lines;
  }
  fs::path dir, calls, fake, suite;
  SuiteRunOptions opts;
};

TEST_F(BenchResume, FinishedProblemsAreSkippedCrashedAndHalfWrittenOnesRunAgain) {
  auto problems = find_problems(suite);
  std::ostringstream log;
  int progress_calls = 0;
  opts.gpus = {"0", "1"};
  opts.jobs = 2;
  auto first = run_suite(problems, opts, log, [&](const std::vector<ProblemResult>&) { ++progress_calls; });
  EXPECT_EQ(progress_calls, 3);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].id, "level1/fast");
  EXPECT_EQ(first[0].status, ProblemStatus::correct);
  EXPECT_DOUBLE_EQ(*first[0].speedup_eager(), 2.0);
  EXPECT_EQ(first[1].status, ProblemStatus::correct);
  EXPECT_EQ(first[2].status, ProblemStatus::failed);
  EXPECT_NE(first[2].reason.find("boom: crashed"), std::string::npos) << first[2].reason;
  auto calls1 = call_log();
  ASSERT_EQ(calls1.size(), 3u);
  for (const auto& c : calls1) EXPECT_TRUE(c.find("gpu=0") != std::string::npos || c.find("gpu=1") != std::string::npos) << c;
  EXPECT_NE(log.str().find("[3/3]"), std::string::npos) << log.str();
  EXPECT_TRUE(fs::exists(opts.out / "level1" / "fast" / kFinishedRecord));
  EXPECT_TRUE(fs::exists(opts.out / "level2" / "crash" / kFinishedRecord)) << "a crash is measured: final and failed";

  // Interrupted while writing: a half-written record does not count.
  fs::path slow_record = opts.out / "level1" / "slow" / kFinishedRecord;
  std::string text = fact::read_text_file(slow_record, "record");
  write(slow_record, text.substr(0, text.size() / 2));

  opts.resume = true;
  opts.gpus = {};
  opts.jobs = 1;
  std::ostringstream log2;
  auto second = run_suite(problems, opts, log2);
  EXPECT_EQ(call_log(), (std::vector<std::string>{"slow.py gpu="}));
  EXPECT_EQ(second[2].status, ProblemStatus::failed);
  EXPECT_NE(second[2].reason.find("boom: crashed"), std::string::npos) << second[2].reason;
  EXPECT_NE(log2.str().find("level1/fast: already done, skipped (correct, 2.00x vs eager)"), std::string::npos) << log2.str();
  EXPECT_EQ(second[0].status, ProblemStatus::correct);
  EXPECT_EQ(second[1].status, ProblemStatus::correct);

  // Other settings or an edited problem file: the old result does not count.
  opts.top = 3;
  run_suite(problems, opts, log2);
  EXPECT_EQ(call_log().size(), 3u);
  write(suite / "level1" / "fast.py", std::string(kProblem) + "# edited\n# fake_e2e: {\"correct\": false}\n");
  auto third = run_suite(find_problems(suite), opts, log2);
  EXPECT_EQ(call_log(), (std::vector<std::string>{"fast.py gpu="}));
  EXPECT_EQ(third[0].status, ProblemStatus::incorrect);

  // Without --resume everything runs again.
  opts.resume = false;
  run_suite(find_problems(suite), opts, log2);
  EXPECT_EQ(call_log().size(), 3u);
}

// Open world: a problem whose optimize died of std::terminate is measured and failed, with the signal named, and
// stays so on --resume; one stopped from outside (the device script's hard stop) runs again.
TEST_F(BenchResume, AnAbortIsAMeasuredFailureAndAStoppedRunIsRetried) {
  fs::remove_all(suite);
  write(suite / "level3" / "abort.py", std::string(kProblem) + "# fake_abort\n");
  write(suite / "level3" / "stopped.py", std::string(kProblem) + "# fake_stopped\n");
  std::ostringstream log;
  auto first = run_suite(find_problems(suite), opts, log);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].status, ProblemStatus::failed);
  EXPECT_NE(first[0].reason.find("crashed (signal"), std::string::npos) << first[0].reason;
  EXPECT_NE(first[0].reason.find("terminate called"), std::string::npos) << first[0].reason;
  auto m = level_metrics("level3", first);
  EXPECT_EQ(m.measured, 2);
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(*m.correct_fraction, 0.0);
  call_log();
  opts.resume = true;
  auto second = run_suite(find_problems(suite), opts, log);
  EXPECT_EQ(call_log(), (std::vector<std::string>{"stopped.py gpu="}));
  EXPECT_EQ(second[0].status, ProblemStatus::failed);
}

TEST_F(BenchResume, NoProblemStartsAfterTheTimeBudget) {
  write(suite / "level1" / "0_sleepy.py", std::string(kProblem) + "# fake_sleep\n# fake_e2e: {\"correct\": true}\n");
  opts.time_budget = std::chrono::seconds(1);
  std::ostringstream log;
  auto rs = run_suite(find_problems(suite), opts, log);
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_EQ(rs[0].id, "level1/0_sleepy");
  EXPECT_EQ(rs[0].status, ProblemStatus::correct);
  for (size_t i = 1; i < rs.size(); ++i) {
    EXPECT_EQ(rs[i].status, ProblemStatus::not_run) << rs[i].id;
    EXPECT_NE(rs[i].reason.find("--resume"), std::string::npos);
  }
  EXPECT_EQ(call_log().size(), 1u);
}

TEST_F(BenchResume, WorkersSharingAGpuAreGivenItsLockAndOthersAreNot) {
  auto problems = find_problems(suite);
  auto lock_of = [&](const char* level, const char* name) {
    std::string text = fact::read_text_file(opts.out / level / name / "gpu_lock.txt", "lock");
    return text.substr(0, text.find('\n'));
  };
  std::ostringstream log;
  opts.gpus = {"0", "1"};
  opts.jobs = 2;  // one worker per GPU: nothing to share
  run_suite(problems, opts, log);
  EXPECT_EQ(lock_of("level1", "fast"), "");
  EXPECT_EQ(lock_of("level1", "slow"), "");

  opts.gpus = {"3"};
  opts.jobs = 3;  // three workers on one GPU: all of them take turns on GPU 3's lock
  run_suite(problems, opts, log);
  std::string lock = lock_of("level1", "fast");
  EXPECT_EQ(fs::path(lock).filename(), ".gpu3.lock");
  EXPECT_TRUE(fs::path(lock).is_absolute()) << lock;
  EXPECT_EQ(lock_of("level1", "slow"), lock);
  call_log();
}
