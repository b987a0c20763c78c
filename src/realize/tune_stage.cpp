#include "realize/tune_stage.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/files.h"
#include "core/gpu_devices.h"
#include "core/vocabulary.h"
#include "discover/channels_last_chain.h"
#include "discover/plan.h"
#include "realize/family_tuner.h"
#include "realize/kernel_build_job.h"

namespace fact::realize {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void progress_bar(std::ostream& log, const BuildProgress& p) {
  constexpr int kWidth = 24;
  int filled = p.total ? static_cast<int>(kWidth * p.done / p.total) : kWidth;
  log << fmt::format("\r  build [{}{}] {}/{} {} {}   ", std::string(filled, '#'), std::string(kWidth - filled, '.'),
                     p.done, p.total, p.id, to_string(p.status))
      << (p.done == p.total ? "\n" : "") << std::flush;
}

std::string ms(const std::optional<double>& v) { return v ? fmt::format("{:.4f}", *v) : "-"; }

// A plan entry's kernel family and problem, read once for the builds ahead and the tuning loop:
// no family (PyTorch keeps the pattern), or the problem, or why the family cannot take the match.
struct EntryProblem {
  const KernelFamily* family = nullptr;
  json problem;
  std::string error;
};

EntryProblem entry_problem(const discover::Match& m, const discover::Plan& plan, Numerics numerics) {
  EntryProblem e;
  e.family = kernel_family_for(m);
  if (!e.family) return e;
  try {
    e.problem = e.family->problem_from_match(m, plan.graph, discover::family_numerics(plan, e.family->name(), numerics),
                                             plan.arch);
  } catch (const Error& err) {
    e.error = err.what();
  }
  return e;
}

// A pattern that a chain of its family's ops feeds (a ResNet's convolutions) is tuned on the layout the composer will
// hand it there (channels-last), not on the module's: the two can pick different winners, or none.
void chain_channels_last(const discover::Plan& plan, std::vector<std::optional<EntryProblem>>& problems) {
  std::vector<json> chained(problems.size());  // the problem in a chain; null where the family has no such path
  for (size_t i = 0; i < problems.size(); ++i) {
    if (!problems[i] || !problems[i]->family || !problems[i]->error.empty()) continue;
    json p = problems[i]->family->in_channels_last_chain(problems[i]->problem);
    if (p != problems[i]->problem) chained[i] = std::move(p);
  }
  auto chains = [&](size_t i) { return !chained[i].is_null(); };
  for (size_t i = 0; i < problems.size(); ++i)
    if (chains(i) && discover::fed_by_own_family(plan, i, chains)) problems[i]->problem = chained[i];
}

// Builds run ahead of their measurement, several patterns at a time: each batch takes as many patterns' builds as
// there are compile slots (at least one pattern's), in parallel, so that one pattern's two or three compiles do not
// leave the other cores idle; each tune then finds its kernels in the cache. One pattern at a time, MiniGPT's cold
// tune spent 195-211 s compiling on the H100's 16 cores, and a resumed ResNet-50 rebuilt its 13 recorded winners
// one by one for over five minutes.
class BuildAhead {
 public:
  BuildAhead(const discover::Plan& plan, const std::vector<std::optional<EntryProblem>>& problems, TuningDb& db,
             const TuneOptions& to, std::ostream& log)
      : plan_(plan), problems_(problems), db_(db), to_(to), log_(log) {}

  // Builds pattern i's kernels unless an earlier batch did; returns how long a batch that tunes (more than rebuilding
  // recorded winners) took, which the tuning budget counts.
  std::chrono::steady_clock::duration ensure(size_t i) {
    if (i < next_) return {};
    unsigned slots = to_.jobs ? to_.jobs : std::max(1u, std::thread::hardware_concurrency());
    std::vector<BuildJob> batch;
    bool tunes = false;
    size_t patterns = 0;
    for (next_ = i; next_ < plan_.entries.size(); ++next_) {
      const auto& e = problems_[next_];
      if (!e || !e->family || !e->error.empty()) continue;
      auto planned = planned_build_jobs(*e->family, plan_.entries[next_].match.rule, e->problem, db_, to_);
      // One compile per kernel: a kernel's run-time variants, and patterns of one shape, share the build.
      std::vector<BuildJob> fresh;
      for (auto& job : planned.jobs) {
        auto same = [&](const BuildJob& b) {
          return b.source == job.source && b.command == job.command && b.link_command == job.link_command;
        };
        if (std::none_of(batch.begin(), batch.end(), same) && std::none_of(fresh.begin(), fresh.end(), same))
          fresh.push_back(std::move(job));
      }
      if (!batch.empty() && batch.size() + fresh.size() > slots) break;
      tunes = tunes || (!planned.recorded_winner && !planned.jobs.empty());
      patterns += planned.jobs.empty() ? 0 : 1;
      for (auto& job : fresh) batch.push_back(std::move(job));
    }
    if (batch.empty()) return {};
    log_ << fmt::format("building {} kernel(s) of {} pattern(s) in parallel, ahead of their measurement\n",
                        batch.size(), patterns);
    if (tunes) prewarm_measurement(to_);
    auto begun = std::chrono::steady_clock::now();
    build_kernels(batch, kernel_build_options(to_.jobs, to_.on_build_progress));
    return tunes ? std::chrono::steady_clock::now() - begun : std::chrono::steady_clock::duration{};
  }

 private:
  const discover::Plan& plan_;
  const std::vector<std::optional<EntryProblem>>& problems_;
  TuningDb& db_;
  const TuneOptions& to_;
  std::ostream& log_;
  size_t next_ = 0;  // the first pattern no batch has built
};

}  // namespace

json tune_plan(const TunePlanRequest& o, std::ostream& out, std::ostream& log) {
  const ir::OpTable& ops = ir::OpTable::builtin();
  auto plan = discover::plan_from_json(read_json_file(o.plan, "plan file"), o.plan.string(), ops);
  Numerics numerics = o.numerics.empty() ? plan.numerics : numerics_from_string(o.numerics);
  auto db = TuningDb::open(o.db.empty() ? default_tuning_db_path() : fs::path(o.db));

  realize::TuneOptions to;
  to.top_n = o.top;
  to.jobs = o.jobs;
  to.force = o.force;
  to.measure = !o.build_only;
  to.work_dir = o.work_dir;
  to.log = [&log](const std::string& line) { log << "  " << line << "\n"; };
  to.on_build_progress = [&log](const BuildProgress& p) { progress_bar(log, p); };
  to.device = visible_gpu_name();

  auto wanted = [&](const auto& m) {  // asked for other families only: no row, so PyTorch keeps it downstream
    return o.families.empty() ||
           std::find(o.families.begin(), o.families.end(), m.kernel.value("family", m.family)) != o.families.end();
  };
  std::vector<std::optional<EntryProblem>> problems;  // none for a pattern not asked for
  for (const auto& entry : plan.entries)
    problems.push_back(wanted(entry.match) ? std::optional(entry_problem(entry.match, plan, numerics)) : std::nullopt);
  chain_channels_last(plan, problems);
  BuildAhead ahead(plan, problems, db, to, log);

  json rows = json::array();
  int i = 0;
  // The budget counts tuning only: a winner the database already holds (rebuilt for the op library) spends none of
  // it, so a run resumed with the database tunes what the earlier one left (on the H100 the rebuilds of ResNet-50's
  // 13 recorded winners took a 330-second budget before one new workload was tuned).
  std::chrono::steady_clock::duration spent{0};
  for (auto& entry : plan.entries) {
    const auto& m = entry.match;
    const auto& read = problems[i];
    ++i;
    to.cached_only = o.budget.count() > 0 && spent >= o.budget;
    if (!read) continue;
    spent += ahead.ensure(i - 1);
    json row = {{"pattern", m.rule}, {"anchor", m.anchor}, {"numerics", numerics}, {"arch", plan.arch}};
    const realize::KernelFamily* family = read->family;
    if (!family) {
      row["status"] = "not_realized";
      row["message"] = fmt::format("family '{}' has no realizer in stage 2 yet; PyTorch's ops stay", m.family);
      log << fmt::format("[{}/{}] {} at {}: {}\n", i, plan.entries.size(), m.rule, m.anchor, row["message"].get<std::string>());
      rows.push_back(row);
      continue;
    }
    auto unsupported = [&](const std::string& why) {
      row["status"] = "unsupported";
      row["message"] = why;
      log << fmt::format("  -> left to PyTorch: {}\n", why);
    };
    if (!read->error.empty()) {
      unsupported(read->error);
      rows.push_back(row);
      continue;
    }
    try {
      const json& problem = read->problem;
      row["family"] = family->name();
      row["problem"] = problem;
      // What the kernel computes in: a family's own (a conv of fp32 tensors is TF32, as cuDNN's) where it says.
      if (problem.contains("numerics") && problem["numerics"].is_string()) row["numerics"] = problem["numerics"];
      json shown = problem;  // a generated row-wise problem carries its whole fragment: name its ops instead
      if (shown.contains("fragment") && shown["fragment"].contains("nodes"))
        shown["fragment"] = fmt::format("{} IR nodes", shown["fragment"]["nodes"].size());
      log << fmt::format("[{}/{}] {} at {}: {} {}\n", i, plan.entries.size(), m.rule, m.anchor, family->name(),
                               shown.dump());
      auto begun = std::chrono::steady_clock::now();
      auto outcome = realize::tune_family(*family, m.rule, problem, db, to);
      if (outcome.status != "cached") spent += std::chrono::steady_clock::now() - begun;
      row.update(outcome.to_json());
      log << fmt::format("  -> {}: FACT {} ms, {} {} ms{}\n", outcome.status, ms(outcome.fact_ms),
                               outcome.baseline_name.empty() ? "baseline" : outcome.baseline_name,
                               ms(outcome.baseline_ms), outcome.message.empty() ? "" : " (" + outcome.message + ")");
    } catch (const Error& e) {
      unsupported(e.what());
    }
    rows.push_back(row);
  }

  out << fmt::format("{:<22} {:<10} {:<14} {:>10} {:>10} {:>8} {:>10}  {}\n", "pattern", "anchor", "status",
                           "fact ms", "torch ms", "speedup", "rel err", "winner");
  for (auto& r : rows) {
    auto num = [&](const char* k) { return r.contains(k) && r[k].is_number() ? std::optional<double>(r[k].get<double>()) : std::nullopt; };
    out << fmt::format("{:<22} {:<10} {:<14} {:>10} {:>10} {:>8} {:>10}  {}\n", r["pattern"].get<std::string>(),
                             r["anchor"].get<std::string>(), r["status"].get<std::string>(), ms(num("fact_ms")),
                             ms(num("baseline_ms")), num("speedup") ? fmt::format("{:.2f}x", *num("speedup")) : "-",
                             num("rel_err") ? fmt::format("{:.2e}", *num("rel_err")) : "-", r.value("winner", ""));
  }
  json report = {{"format", "fact-tune-report"}, {"version", 1}, {"plan", o.plan.string()}, {"arch", plan.arch},
                 {"numerics", numerics}, {"db", db.path().string()}, {"rows", rows}};
  if (!o.report.empty()) {
    write_file_atomic(o.report, report.dump(1) + "\n");
    out << "Report written to " << o.report.string() << "\n";
  }
  return report;
}

}  // namespace fact::realize
