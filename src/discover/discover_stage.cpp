#include "discover/discover_stage.h"

#include <fmt/format.h>
#include <unistd.h>

#include "core/arch_spec.h"
#include "core/error.h"
#include "core/files.h"
#include "core/vocabulary.h"
#include "discover/pattern_registry.h"
#include "discover/tracer.h"
#include "discover/user_registry.h"
#include "ir/ir_io.h"

namespace fact::discover {
namespace fs = std::filesystem;

Plan discover_model(const DiscoverRequest& o, std::ostream& out, std::ostream& log) {
  const ir::OpTable& ops = ir::OpTable::builtin();
  // Without a rules folder: data/rules plus the patterns the agent verified and registered ($FACT_REGISTRY).
  auto registry = o.rules_dir.empty() ? builtin_and_user_rules() : PatternRegistry::load(o.rules_dir);
  auto arch = ArchSpec::builtin(o.arch);

  ir::Graph graph;
  if (o.model.extension() == ".json") {
    log << fmt::format("[1/3] loading IR {}\n", o.model.string());
    graph = ir::load_graph(o.model, ops);
  } else {
    fs::path ir_path = o.ir_out.empty() ? fs::temp_directory_path() / fmt::format("fact-ir-{}.json", ::getpid()) : o.ir_out;
    log << fmt::format("[1/3] tracing {} with torch.export (meta tensors, no GPU needed)\n", o.model.string());
    graph = trace_module(o.model, ir_path, ops);
    if (o.ir_out.empty()) fs::remove(ir_path);
  }
  Numerics numerics = o.numerics.empty() ? default_numerics(graph) : numerics_from_string(o.numerics);
  log << fmt::format("[2/3] matching {} rules for {} ({} graph nodes)\n", registry.rules().size(), arch.name,
                     graph.nodes.size());
  auto plan = make_plan(graph, registry, ops, arch, numerics,
                        o.conv_numerics.empty() ? Numerics::tf32 : numerics_from_string(o.conv_numerics));
  log << "[3/3] ranked by the cost model\n";
  out << format_plan(plan);
  if (!o.json_out.empty()) {
    write_file_atomic(o.json_out, to_json(plan).dump(1) + "\n");
    out << fmt::format("Plan written to {}\n", o.json_out.string());
  }
  return plan;
}

}  // namespace fact::discover
