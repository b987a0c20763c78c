#include "bench/suite_runner.h"

#include <csignal>
#include <cstring>

#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "bench/suite_resume.h"
#include "core/files.h"
#include "core/process.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace fact::bench {
namespace {

// The last n non-empty lines of a process's output: where an error message usually is.
std::string last_lines(const std::string& text, size_t n) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    if (end > begin) lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string summary(const ProblemResult& r) {
  std::string text = to_string(r.status);
  if (auto s = r.speedup_eager()) text += fmt::format(", {:.2f}x vs eager", *s);
  if (auto s = r.speedup_compile()) text += fmt::format(", {:.2f}x vs torch.compile", *s);
  if (!r.reason.empty() && r.status != ProblemStatus::correct) text += " (" + r.reason + ")";
  return text;
}

}  // namespace

fs::path problem_out_dir(const fs::path& suite_out, const SuiteProblem& problem) {
  return suite_out / problem.level / problem.name;
}

ProblemResult pending_result(const SuiteProblem& problem, const std::string& reason) {
  ProblemResult r;
  r.id = problem.id();
  r.level = problem.level;
  r.name = problem.name;
  r.path = problem.path.string();
  r.status = ProblemStatus::not_run;
  r.reason = reason;
  return r;
}

std::vector<ProblemResult> run_suite(const std::vector<SuiteProblem>& problems, const SuiteRunOptions& o,
                                     std::ostream& log, const SuiteProgress& on_progress) {
  const auto start = Clock::now();
  std::vector<ProblemResult> results;
  for (const auto& p : problems) results.push_back(pending_result(p, "not started"));
  std::mutex mutex;
  size_t finished = 0;
  auto publish = [&](size_t i, ProblemResult r, const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    results[i] = std::move(r);
    ++finished;
    log << fmt::format("[{}/{}] {}: {}\n", finished, problems.size(), problems[i].id(), line) << std::flush;
    if (on_progress) on_progress(results);
  };

  // Done problems first, so the progress count shows at once what is left.
  std::vector<size_t> todo;
  std::vector<nlohmann::json> keys;
  for (size_t i = 0; i < problems.size(); ++i) {
    keys.push_back(run_key(problems[i].path, o.arch, o.numerics, o.top, o.conv_numerics));
    std::string why;
    auto done = o.resume ? load_finished(problem_out_dir(o.out, problems[i]), keys[i], &why) : std::nullopt;
    if (done) publish(i, *done, "already done, skipped (" + summary(*done) + ")");
    else todo.push_back(i);
  }

  const bool shared_gpus = !o.gpus.empty() && o.jobs > static_cast<int>(o.gpus.size());
  std::atomic<size_t> next{0};
  auto worker = [&](int w) {
    std::string gpu = o.gpus.empty() ? "" : o.gpus[w % o.gpus.size()];
    for (size_t k; (k = next++) < todo.size();) {
      size_t i = todo[k];
      const SuiteProblem& p = problems[i];
      auto elapsed = Clock::now() - start;
      if (o.time_budget.count() > 0 && elapsed >= o.time_budget) {
        publish(i, pending_result(p, fmt::format("not started: the time budget of {} s ran out; run again with --resume",
                                                 o.time_budget.count())),
                "not started (time budget spent)");
        continue;
      }
      fs::path out = problem_out_dir(o.out, p);
      fs::remove(out / kFinishedRecord);  // a result from other settings must not survive a failed re-run
      fs::remove(out / "report.json");
      fs::remove(out / "e2e.json");
      fs::create_directories(out);
      {
        std::lock_guard<std::mutex> lock(mutex);
        log << fmt::format("[start] {}{}\n", p.id(), gpu.empty() ? "" : " on GPU " + gpu) << std::flush;
      }
      std::vector<std::string> argv = o.optimize_command;
      argv.insert(argv.end(), {p.path.string(), "--out", out.string(), "--arch", o.arch, "--top", std::to_string(o.top)});
      if (!o.numerics.empty()) argv.insert(argv.end(), {"--numerics", o.numerics});
      if (!o.conv_numerics.empty()) argv.insert(argv.end(), {"--conv-numerics", o.conv_numerics});
      ProcessOptions po;
      po.env = o.env;
      if (!gpu.empty()) po.env["CUDA_VISIBLE_DEVICES"] = gpu;
      // Workers sharing a GPU take turns on it: FACT's GPU processes hold this file's flock while they run
      // (python/fact/gpu_lock.py), so a timing never overlaps another problem's kernels.
      if (!gpu.empty() && shared_gpus) po.env["FACT_GPU_LOCK"] = fs::absolute(o.out / (".gpu" + gpu + ".lock")).string();
      po.timeout = o.problem_timeout;
      auto t0 = Clock::now();
      ProcessResult pr;
      try {
        pr = run_process(argv, po);
      } catch (const std::exception& e) {
        pr.exit_code = -1;
        pr.err = e.what();
      }
      double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      write_file_atomic(out / "optimize.log", pr.out + pr.err);

      ProblemResult r = read_problem_result(p, out);
      r.seconds = seconds;
      bool completed = pr.exit_code == 0 || fs::exists(out / "report.json");
      if (pr.timed_out) {
        r.status = ProblemStatus::failed;
        r.reason = fmt::format("fact optimize ran past --problem-timeout ({} s) and was stopped", o.problem_timeout.count());
      } else if (!completed) {
        r.status = ProblemStatus::failed;
        r.reason = pr.signal ? fmt::format("fact optimize crashed (signal {}: {}): {}", pr.signal, strsignal(pr.signal),
                                           one_line(last_lines(pr.err, 3)))
                             : fmt::format("fact optimize exited with {}: {}", pr.exit_code, one_line(last_lines(pr.err, 3)));
      }
      // A run is final once it reported, failed or crashed on its own, or ran out of its time: it counts as
      // measured and failed. Only one stopped from outside (SIGTERM/SIGKILL/SIGINT: a hard stop of the whole
      // run) is tried again on --resume.
      bool interrupted = !pr.timed_out && (pr.signal == SIGTERM || pr.signal == SIGKILL || pr.signal == SIGINT || pr.signal == SIGHUP);
      if (!interrupted) save_finished(out, keys[i], r);
      publish(i, r, fmt::format("{} ({:.0f} s)", summary(r), seconds));
    }
  };
  int jobs = std::max(1, std::min<int>(o.jobs, static_cast<int>(std::max<size_t>(todo.size(), 1))));
  std::vector<std::thread> threads;
  for (int w = 0; w < jobs; ++w) threads.emplace_back(worker, w);
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace fact::bench
