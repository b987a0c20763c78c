#include "compose/compose_stage.h"

#include <fmt/format.h>

#include "compose/module_writer.h"
#include "compose/pattern_verdicts.h"
#include "core/error.h"
#include "core/files.h"
#include "discover/plan.h"

namespace fact::compose {
namespace fs = std::filesystem;

void compose_model(const ComposeRequest& o, std::ostream& out) {
  auto plan = discover::plan_from_json(read_json_file(o.plan, "plan file"), o.plan.string(), ir::OpTable::builtin());
  auto verdicts = pattern_verdicts(plan, read_json_file(o.report, "tune report"), o.report.string());
  if (!fs::is_regular_file(o.model))
    throw Error(fmt::format("model file {} does not exist; pass the KernelBench-style file the plan was traced from",
                            o.model.string()));
  ComposeSources sources{o.model, o.plan.string(), o.report.string(), o.op_library.string()};
  try {
    verdicts = write_composed_module(plan, verdicts, sources, o.out);
  } catch (const fs::filesystem_error& e) {
    throw Error(fmt::format("cannot write the composed module to {}: {}", o.out.string(), e.what()));
  }
  for (const auto& v : verdicts) {
    const auto& m = plan.entries[v.entry].match;
    out << fmt::format("{:<22} {:<10} {}\n", m.rule, m.anchor,
                       v.accepted ? "FACT: torch.ops.fact." + v.op_name : v.reason);
  }
  out << fmt::format("Composed module written to {}/{}\n", o.out.string(), kComposedModuleFile);
}

}  // namespace fact::compose
