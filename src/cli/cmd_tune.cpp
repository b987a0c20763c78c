// `fact tune PLAN.json`: stage 2 for the plan's patterns of every realized family (data/families, through
// the KernelFamily seam). Each becomes tuned kernels (or stays with PyTorch, with the
// reason); results persist in the tuning database.
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "core/vocabulary.h"
#include "realize/kernel_family.h"
#include "realize/tune_stage.h"

using namespace fact;

namespace {

const bool registered = cli::register_command("tune", [](CLI::App& app) {
  auto o = std::make_shared<realize::TunePlanRequest>();
  auto* cmd = app.add_subcommand("tune", "Stage 2: generate, build, verify and time kernels for a plan's patterns");
  cmd->alias("realize");
  cmd->add_option("plan", o->plan, "plan JSON written by `fact discover --json`")->required();
  cmd->add_option("--db", o->db, "tuning database (default $FACT_TUNING_DB or ~/.cache/fact/tuning.sqlite)");
  cmd->add_option("--numerics", o->numerics, "override the plan's numerics mode")
      ->check(CLI::IsMember(numerics_names()));
  cmd->add_option("--top", o->top, "kernels to build and measure per pattern (a GEMM kernel with its run-time variants)")->check(CLI::Range(1, 256));
  cmd->add_option("-j,--jobs", o->jobs, "parallel compiles (default: all cores)");
  cmd->add_flag("--force", o->force, "tune again even if the database has a winner");
  cmd->add_flag("--build-only", o->build_only, "generate and compile, do not measure (no GPU needed)");
  cmd->add_option("--family", o->families, "tune only patterns of these families (data/families)")
      ->check(CLI::IsMember(realize::kernel_family_names()));
  cmd->add_option("--report", o->report, "write the per-pattern results as JSON here");
  cmd->add_option("--work-dir", o->work_dir, "where measurement requests and results go");
  cmd->callback([o] { realize::tune_plan(*o, std::cout, std::cerr); });
});

}  // namespace
