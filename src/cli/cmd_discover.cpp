// `fact discover MODEL.py`: stage 1. Trace, match the registry, rank by the cost model, print the plan.
#include <iostream>

#include "cli/command.h"
#include "core/vocabulary.h"
#include "discover/discover_stage.h"

using namespace fact;

namespace {

void run_discover(const discover::DiscoverRequest& request) { discover::discover_model(request, std::cout, std::cerr); }

const bool registered = cli::register_command("discover", [](CLI::App& app) {
  auto opts = std::make_shared<discover::DiscoverRequest>();
  auto* cmd = app.add_subcommand("discover", "Stage 1: trace a PyTorch module, match patterns, rank them, print the plan");
  cmd->add_option("model", opts->model, "KernelBench-style module file (Model, get_inputs, get_init_inputs), or an IR .json")
      ->required();
  cmd->add_option("--arch", opts->arch, "target architecture")->check(CLI::IsMember(arch_names()));
  cmd->add_option("--numerics", opts->numerics, "numerics mode (default: from the graph's dtype; fp32 graphs -> 3xtf32)")
      ->check(CLI::IsMember(numerics_names()));
  cmd->add_option("--conv-numerics", opts->conv_numerics,
                  "fp32 convolutions (in an fp32-accurate plan): tf32, as PyTorch's cuDNN default, or 3xtf32, "
                  "fp32-accurate against cuDNN with TF32 off")
      ->check(CLI::IsMember(conv_numerics_names()));
  cmd->add_option("--json", opts->json_out, "write the plan as JSON here (input of `fact tune`)");
  cmd->add_option("--ir", opts->ir_out, "also keep the traced IR here");
  cmd->add_option("--rules", opts->rules_dir, "pattern registry folder (default: data/rules and the user registry, $FACT_REGISTRY)");
  cmd->callback([opts] { run_discover(*opts); });
});

}  // namespace
