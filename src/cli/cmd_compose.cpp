// `fact compose PLAN.json TUNE_REPORT.json --model MODEL.py --out DIR`: stage 3. The plan's patterns
// that won in tuning become torch.ops.fact calls in DIR/model_new.py (class ModelNew); the rest stay
// PyTorch ops, each with the reason in the module and in DIR/manifest.json.
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "compose/compose_stage.h"

using namespace fact;

namespace {

const bool registered = cli::register_command("compose", [](CLI::App& app) {
  auto o = std::make_shared<compose::ComposeRequest>();
  auto* cmd = app.add_subcommand("compose", "Stage 3: write ModelNew, the module that calls the tuned FACT kernels");
  cmd->add_option("plan", o->plan, "plan JSON written by `fact discover --json`")->required();
  cmd->add_option("report", o->report, "tune report written by `fact tune PLAN.json --report FILE`")->required();
  cmd->add_option("--model", o->model, "the KernelBench-style file the plan was traced from")->required();
  cmd->add_option("--out", o->out, "folder to write (model_new.py, user_model.py, manifest.json)")->required();
  cmd->add_option("--op-library", o->op_library, "built op library (libfact_ops.so) to record in the manifest");
  cmd->callback([o] { compose::compose_model(*o, std::cout); });
});

}  // namespace
