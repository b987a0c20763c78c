// `fact compose PLAN.json TUNE_REPORT.json --model MODEL.py --out DIR`: stage 3. The plan's patterns
// that won in tuning become torch.ops.fact calls in DIR/model_new.py (class ModelNew); the rest stay
// PyTorch ops, each with the reason in the module and in DIR/manifest.json.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/command.h"
#include "compose/module_writer.h"
#include "compose/pattern_verdicts.h"
#include "core/error.h"
#include "core/files.h"
#include "discover/plan.h"

namespace fs = std::filesystem;
using namespace fact;

namespace {

struct ComposeCliOptions {
  std::string plan;
  std::string report;
  std::string model;
  std::string out;
  std::string op_library;
};

void run_compose(const ComposeCliOptions& o) {
  auto plan = discover::plan_from_json(read_json_file(o.plan, "plan file"), o.plan, ir::OpTable::builtin());
  auto verdicts = compose::pattern_verdicts(plan, read_json_file(o.report, "tune report"), o.report);
  if (!fs::is_regular_file(o.model))
    throw Error(fmt::format("model file {} does not exist; pass the KernelBench-style file the plan was traced from",
                            o.model));
  compose::ComposeSources sources{o.model, o.plan, o.report, o.op_library};
  try {
    verdicts = compose::write_composed_module(plan, verdicts, sources, o.out);
  } catch (const fs::filesystem_error& e) {
    throw Error(fmt::format("cannot write the composed module to {}: {}", o.out, e.what()));
  }
  for (const auto& v : verdicts) {
    const auto& m = plan.entries[v.entry].match;
    std::cout << fmt::format("{:<22} {:<10} {}\n", m.rule, m.anchor,
                             v.accepted ? "FACT: torch.ops.fact." + v.op_name : v.reason);
  }
  std::cout << fmt::format("Composed module written to {}/{}\n", o.out, compose::kComposedModuleFile);
}

const bool registered = cli::register_command("compose", [](CLI::App& app) {
  auto o = std::make_shared<ComposeCliOptions>();
  auto* cmd = app.add_subcommand("compose", "Stage 3: write ModelNew, the module that calls the tuned FACT kernels");
  cmd->add_option("plan", o->plan, "plan JSON written by `fact discover --json`")->required();
  cmd->add_option("report", o->report, "tune report written by `fact tune PLAN.json --report FILE`")->required();
  cmd->add_option("--model", o->model, "the KernelBench-style file the plan was traced from")->required();
  cmd->add_option("--out", o->out, "folder to write (model_new.py, user_model.py, manifest.json)")->required();
  cmd->add_option("--op-library", o->op_library, "built op library (libfact_ops.so) to record in the manifest");
  cmd->callback([o] { run_compose(*o); });
});

}  // namespace
