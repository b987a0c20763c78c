// `fact bench DIR`: `fact optimize` on every problem of a KernelBench-layout folder, one worker per GPU,
// resumable, then per-problem and per-level results (suite.json, suite.md, suite.png).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "bench/suite_chart.h"
#include "bench/suite_metrics.h"
#include "bench/suite_report.h"
#include "bench/suite_resume.h"
#include "bench/suite_runner.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/vocabulary.h"
#include "core/files.h"
#include "core/gpu_devices.h"

namespace fs = std::filesystem;
using namespace fact;
using namespace fact::bench;
using nlohmann::json;

namespace {

struct BenchOptions {
  std::string dir;
  std::string out = "out/bench";
  std::string arch = "sm90";
  std::string numerics;
  std::string conv_numerics;
  std::string db;
  int jobs = 0;  // 0: one per GPU
  int top = 2;
  bool resume = false;
  bool report_only = false;
  bool no_max_autotune = false;
  int time_budget_s = 0;
  int problem_timeout_s = 1800;
};

void run_bench(const BenchOptions& o) {
  auto problems = find_problems(o.dir);
  std::vector<std::string> gpus = visible_gpus();
  int jobs = o.jobs > 0 ? o.jobs : std::max<int>(1, static_cast<int>(gpus.size()));
  std::cerr << fmt::format("fact bench: {} problems in {}; {} worker(s), {}\n", problems.size(), o.dir, jobs,
                           gpus.empty() ? "no GPU visible" : fmt::format("GPUs {}", fmt::join(gpus, ",")));
  if (!gpus.empty() && jobs > static_cast<int>(gpus.size()))
    std::cerr << fmt::format("  {} workers share {} GPU(s): builds overlap, GPU work takes turns (one lock per GPU)\n",
                             jobs, gpus.size());

  SuiteInfo info{o.dir, o.arch, o.numerics, o.top, jobs, gpus, o.conv_numerics};
  fs::path out(o.out);
  fs::create_directories(out);
  std::vector<ProblemResult> results;
  if (o.report_only) {
    // The header describes the run that measured (its workers and GPUs), not the machine redrawing the report.
    if (fs::exists(out / "suite.json")) {
      json before = read_json_file(out / "suite.json", "suite report");
      if (o.jobs == 0 && before.contains("jobs") && before["jobs"].is_number_integer()) info.jobs = before["jobs"].get<int>();
      if (before.contains("gpus") && before["gpus"].is_array()) info.gpus = before["gpus"].get<std::vector<std::string>>();
    }
    for (const auto& p : problems) {
      std::string why;
      fs::path dir = problem_out_dir(out, p);
      auto done = load_finished(dir, run_key(p.path, o.arch, o.numerics, o.top, o.conv_numerics), &why);
      if (!done) {
        results.push_back(pending_result(p, "not run (" + why + ")"));
        continue;
      }
      // A finished problem is read again from its optimize report, so a redrawn report gains what today's
      // reader extracts; the wall time, and a failure's reason (a timeout leaves no report), stay as saved.
      if (done->status == ProblemStatus::failed || done->status == ProblemStatus::not_run) {
        results.push_back(*done);
        continue;
      }
      ProblemResult again = read_problem_result(p, dir);
      again.seconds = done->seconds;
      results.push_back(again);
    }
  } else {
    SuiteRunOptions ro;
    ro.out = out;
    ro.optimize_command = {fs::read_symlink("/proc/self/exe").string(), "optimize"};
    // max-autotune compiles for minutes per model: a suite may leave that baseline out (reported as not run).
    if (o.no_max_autotune) ro.optimize_command.push_back("--no-max-autotune");
    ro.arch = o.arch;
    ro.numerics = o.numerics;
    ro.conv_numerics = o.conv_numerics;
    ro.top = o.top;
    ro.jobs = jobs;
    ro.gpus = gpus;
    ro.resume = o.resume;
    ro.problem_timeout = std::chrono::seconds(o.problem_timeout_s);
    ro.time_budget = std::chrono::seconds(o.time_budget_s);
    if (!o.db.empty()) ro.env["FACT_TUNING_DB"] = fs::absolute(o.db).string();  // one database for every worker
    // Rewritten after every problem, so an interrupted suite still leaves a current report.
    results = run_suite(problems, ro, std::cerr, [&](const std::vector<ProblemResult>& so_far) {
      write_suite_report(out, info, so_far);
    });
  }
  write_suite_report(out, info, results);
  std::string chart = draw_suite_chart(out / "suite.json", out / "suite.png");
  if (!chart.empty()) std::cerr << "  " << chart << "\n";

  for (const auto& m : suite_metrics(results)) {
    auto f = [](const std::optional<double>& v, const char* spec) {
      return v ? fmt::format(fmt::runtime(spec), *v) : std::string("—");
    };
    std::cout << fmt::format("{:<8} {:>3} problems, {:>3} measured, {:>3} correct; fast_1.0 {} fast_1.5 {} fast_2.0 {};"
                             " geomean {} vs eager\n",
                             m.level, m.problems, m.measured, m.correct, f(m.fast_p[0].vs_eager, "{:.2f}"),
                             f(m.fast_p[1].vs_eager, "{:.2f}"), f(m.fast_p[2].vs_eager, "{:.2f}"),
                             f(m.geomean_speedup_eager, "{:.2f}x"));
    if (m.level == "all" && m.not_measured > 0)
      std::cout << fmt::format("{} problem(s) not measured (no GPU, or not run yet): left out of the fractions\n",
                               m.not_measured);
  }
  std::cout << fmt::format("Report: {}/suite.md, {}/suite.json{}\n", out.string(), out.string(),
                           chart.empty() ? ", " + (out / "suite.png").string() : "");
}

const bool registered = cli::register_command("bench", [](CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Suite: fact optimize on every problem of a KernelBench-layout folder");
  cmd->add_option("dir", o->dir, "folder of level folders (level1/, level2/, ...) of problem files, or one level folder")
      ->required();
  cmd->add_option("--out", o->out, "output folder: one folder per problem, suite.json, suite.md, suite.png");
  cmd->add_option("--arch", o->arch, "target architecture")->check(CLI::IsMember(arch_names()));
  cmd->add_option("--numerics", o->numerics, "numerics mode for every problem (default: each problem's own)")
      ->check(CLI::IsMember(numerics_names()));
  cmd->add_option("--conv-numerics", o->conv_numerics,
                  "fp32 convolutions: tf32 (PyTorch's cuDNN default) or 3xtf32 (fp32-accurate, against cuDNN with "
                  "TF32 off)")
      ->check(CLI::IsMember(conv_numerics_names()));
  cmd->add_option("--jobs", o->jobs, "parallel workers (default: one per GPU, 1 without a GPU); more than the GPUs overlap builds, GPU work takes turns")->check(CLI::Range(1, 64));
  cmd->add_option("--top", o->top, "kernels built and measured per pattern (a GEMM kernel with its run-time variants)")->check(CLI::Range(1, 64));
  cmd->add_flag("--resume", o->resume, "skip problems whose finished result (same file, same settings) is in --out");
  cmd->add_flag("--no-max-autotune", o->no_max_autotune, "do not time torch.compile(mode=\"max-autotune\") per problem");
  cmd->add_flag("--report-only", o->report_only, "run nothing: report the finished results already in --out");
  cmd->add_option("--db", o->db, "tuning database shared by all workers (default $FACT_TUNING_DB or ~/.cache/fact)");
  cmd->add_option("--time-budget", o->time_budget_s, "seconds after which no new problem starts (0: none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--problem-timeout", o->problem_timeout_s, "seconds one problem may run before it is stopped (0: none)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([o] { run_bench(*o); });
});

}  // namespace
