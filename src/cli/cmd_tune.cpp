// `fact tune PLAN.json`: stage 2 for the plan's patterns of every realized family (data/families, through
// the KernelFamily seam). Each becomes tuned kernels (or stays with PyTorch, with the
// reason); results persist in the tuning database.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "core/error.h"
#include "core/vocabulary.h"
#include "core/files.h"
#include "core/gpu_devices.h"
#include "discover/plan.h"
#include "realize/family_tuner.h"

namespace fs = std::filesystem;
using namespace fact;
using nlohmann::json;

namespace {

struct TuneCliOptions {
  std::string plan;
  std::string db;
  std::string report;
  std::string work_dir;
  std::string numerics;
  int top = 8;
  unsigned jobs = 0;
  bool force = false;
  bool build_only = false;
  std::vector<std::string> families;  // empty: every family
};

void progress_bar(const BuildProgress& p) {
  constexpr int kWidth = 24;
  int filled = p.total ? static_cast<int>(kWidth * p.done / p.total) : kWidth;
  std::cerr << fmt::format("\r  build [{}{}] {}/{} {} {}   ", std::string(filled, '#'), std::string(kWidth - filled, '.'),
                           p.done, p.total, p.id, to_string(p.status))
            << (p.done == p.total ? "\n" : "") << std::flush;
}

std::string ms(const std::optional<double>& v) { return v ? fmt::format("{:.4f}", *v) : "-"; }

void run_tune(const TuneCliOptions& o) {
  const ir::OpTable& ops = ir::OpTable::builtin();
  auto plan = discover::plan_from_json(read_json_file(o.plan, "plan file"), o.plan, ops);
  Numerics numerics = o.numerics.empty() ? plan.numerics : numerics_from_string(o.numerics);
  Arch arch = plan.arch;
  auto db = TuningDb::open(o.db.empty() ? default_tuning_db_path() : fs::path(o.db));

  realize::TuneOptions to;
  to.top_n = o.top;
  to.jobs = o.jobs;
  to.force = o.force;
  to.measure = !o.build_only;
  to.work_dir = o.work_dir;
  to.log = [](const std::string& line) { std::cerr << "  " << line << "\n"; };
  to.on_build_progress = progress_bar;
  to.device = visible_gpu_name();

  json rows = json::array();
  int i = 0;
  for (auto& entry : plan.entries) {
    const auto& m = entry.match;
    ++i;
    if (!o.families.empty() &&
        std::find(o.families.begin(), o.families.end(), m.kernel.value("family", m.family)) == o.families.end())
      continue;  // asked for other families only: no row, so PyTorch keeps it downstream
    json row = {{"pattern", m.rule}, {"anchor", m.anchor}, {"numerics", numerics}, {"arch", plan.arch}};
    const realize::KernelFamily* family = realize::kernel_family_for(m);
    if (!family) {
      row["status"] = "not_realized";
      row["message"] = fmt::format("family '{}' has no realizer in stage 2 yet; PyTorch's ops stay", m.family);
      std::cerr << fmt::format("[{}/{}] {} at {}: {}\n", i, plan.entries.size(), m.rule, m.anchor, row["message"].get<std::string>());
      rows.push_back(row);
      continue;
    }
    try {
      auto problem = family->problem_from_match(m, plan.graph, numerics, arch);
      row["family"] = family->name();
      row["problem"] = problem;
      std::cerr << fmt::format("[{}/{}] {} at {}: {} {}\n", i, plan.entries.size(), m.rule, m.anchor, family->name(),
                               problem.dump());
      auto outcome = realize::tune_family(*family, m.rule, problem, db, to);
      row.update(outcome.to_json());
      std::cerr << fmt::format("  -> {}: FACT {} ms, {} {} ms{}\n", outcome.status, ms(outcome.fact_ms),
                               outcome.baseline_name.empty() ? "baseline" : outcome.baseline_name,
                               ms(outcome.baseline_ms), outcome.message.empty() ? "" : " (" + outcome.message + ")");
    } catch (const Error& e) {
      row["status"] = "unsupported";
      row["message"] = e.what();
      std::cerr << fmt::format("  -> left to PyTorch: {}\n", e.what());
    }
    rows.push_back(row);
  }

  std::cout << fmt::format("{:<22} {:<10} {:<14} {:>10} {:>10} {:>8} {:>10}  {}\n", "pattern", "anchor", "status",
                           "fact ms", "torch ms", "speedup", "rel err", "winner");
  for (auto& r : rows) {
    auto num = [&](const char* k) { return r.contains(k) && r[k].is_number() ? std::optional<double>(r[k].get<double>()) : std::nullopt; };
    std::cout << fmt::format("{:<22} {:<10} {:<14} {:>10} {:>10} {:>8} {:>10}  {}\n", r["pattern"].get<std::string>(),
                             r["anchor"].get<std::string>(), r["status"].get<std::string>(), ms(num("fact_ms")),
                             ms(num("baseline_ms")), num("speedup") ? fmt::format("{:.2f}x", *num("speedup")) : "-",
                             num("rel_err") ? fmt::format("{:.2e}", *num("rel_err")) : "-", r.value("winner", ""));
  }
  if (!o.report.empty()) {
    json report = {{"format", "fact-tune-report"}, {"version", 1}, {"plan", o.plan}, {"arch", plan.arch},
                   {"numerics", numerics}, {"db", db.path().string()}, {"rows", rows}};
    write_file_atomic(o.report, report.dump(1) + "\n");
    std::cout << "Report written to " << o.report << "\n";
  }
}

const bool registered = cli::register_command("tune", [](CLI::App& app) {
  auto o = std::make_shared<TuneCliOptions>();
  auto* cmd = app.add_subcommand("tune", "Stage 2: generate, build, verify and time kernels for a plan's patterns");
  cmd->alias("realize");
  cmd->add_option("plan", o->plan, "plan JSON written by `fact discover --json`")->required();
  cmd->add_option("--db", o->db, "tuning database (default $FACT_TUNING_DB or ~/.cache/fact/tuning.sqlite)");
  cmd->add_option("--numerics", o->numerics, "override the plan's numerics mode")
      ->check(CLI::IsMember(numerics_names()));
  cmd->add_option("--top", o->top, "candidates to build and measure per pattern")->check(CLI::Range(1, 256));
  cmd->add_option("-j,--jobs", o->jobs, "parallel compiles (default: all cores)");
  cmd->add_flag("--force", o->force, "tune again even if the database has a winner");
  cmd->add_flag("--build-only", o->build_only, "generate and compile, do not measure (no GPU needed)");
  cmd->add_option("--family", o->families, "tune only patterns of these families (data/families)")
      ->check(CLI::IsMember(realize::kernel_family_names()));
  cmd->add_option("--report", o->report, "write the per-pattern results as JSON here");
  cmd->add_option("--work-dir", o->work_dir, "where measurement requests and results go");
  cmd->callback([o] { run_tune(*o); });
});

}  // namespace
