// `fact discover MODEL.py`: stage 1. Trace, match the registry, rank by the cost model, print the plan.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include <unistd.h>

#include "cli/command.h"
#include "core/error.h"
#include "core/vocabulary.h"
#include "core/files.h"
#include "core/arch_spec.h"
#include "discover/pattern_registry.h"
#include "discover/plan.h"
#include "discover/user_registry.h"
#include "discover/tracer.h"
#include "ir/ir_io.h"

namespace fs = std::filesystem;
using namespace fact;

namespace {

struct DiscoverOptions {
  std::string model;
  std::string arch = "sm90";
  std::string numerics;
  std::string json_out;
  std::string ir_out;
  std::string rules_dir;
};

void run_discover(const DiscoverOptions& o) {
  const ir::OpTable& ops = ir::OpTable::builtin();
  // Without --rules: data/rules plus the patterns the agent verified and registered ($FACT_REGISTRY).
  auto registry = o.rules_dir.empty() ? discover::builtin_and_user_rules() : discover::PatternRegistry::load(o.rules_dir);
  auto arch = ArchSpec::builtin(o.arch);

  ir::Graph graph;
  fs::path model(o.model);
  if (model.extension() == ".json") {
    std::cerr << fmt::format("[1/3] loading IR {}\n", o.model);
    graph = ir::load_graph(model, ops);
  } else {
    fs::path ir_path = o.ir_out.empty() ? fs::temp_directory_path() / fmt::format("fact-ir-{}.json", ::getpid()) : fs::path(o.ir_out);
    std::cerr << fmt::format("[1/3] tracing {} with torch.export (meta tensors, no GPU needed)\n", o.model);
    graph = discover::trace_module(model, ir_path, ops);
    if (o.ir_out.empty()) fs::remove(ir_path);
  }
  Numerics numerics = o.numerics.empty() ? discover::default_numerics(graph) : numerics_from_string(o.numerics);
  std::cerr << fmt::format("[2/3] matching {} rules for {} ({} graph nodes)\n", registry.rules().size(), arch.name,
                           graph.nodes.size());
  auto plan = discover::make_plan(graph, registry, ops, arch, numerics);
  std::cerr << "[3/3] ranked by the cost model\n";
  std::cout << discover::format_plan(plan);
  if (!o.json_out.empty()) {
    write_file_atomic(o.json_out, discover::to_json(plan).dump(1) + "\n");
    std::cout << fmt::format("Plan written to {}\n", o.json_out);
  }
}

const bool registered = cli::register_command("discover", [](CLI::App& app) {
  auto opts = std::make_shared<DiscoverOptions>();
  auto* cmd = app.add_subcommand("discover", "Stage 1: trace a PyTorch module, match patterns, rank them, print the plan");
  cmd->add_option("model", opts->model, "KernelBench-style module file (Model, get_inputs, get_init_inputs), or an IR .json")
      ->required();
  cmd->add_option("--arch", opts->arch, "target architecture")->check(CLI::IsMember(arch_names()));
  cmd->add_option("--numerics", opts->numerics, "numerics mode (default: from the graph's dtype; fp32 graphs -> 3xtf32)")
      ->check(CLI::IsMember(numerics_names()));
  cmd->add_option("--json", opts->json_out, "write the plan as JSON here (input of `fact tune`)");
  cmd->add_option("--ir", opts->ir_out, "also keep the traced IR here");
  cmd->add_option("--rules", opts->rules_dir, "pattern registry folder (default: data/rules and the user registry, $FACT_REGISTRY)");
  cmd->callback([opts] { run_discover(*opts); });
});

}  // namespace
