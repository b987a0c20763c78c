// `fact ops build REPORT.json... --out DIR [--compile]`: the tuned winners as PyTorch custom ops
// (torch.ops.fact.gemm_<id>; torch.ops.fact.<config id> for the normalization and attention families). Writes
// the op library folder; --compile hands it to the Python builder, which needs the GPU machine's torch (a CUDA
// build) and links DIR/libfact_ops.so.
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "realize/op_library_build.h"

using namespace fact;

namespace {

const bool registered = cli::register_command("ops", [](CLI::App& app) {
  auto* ops = app.add_subcommand("ops", "the tuned kernels as PyTorch custom ops (torch.ops.fact.*) in one shared library");
  ops->require_subcommand(1);
  auto o = std::make_shared<realize::OpLibraryBuildRequest>();
  auto* build = ops->add_subcommand("build", "write the op library folder (kernels, ops.cpp, manifest.json) from tune reports");
  build->add_option("reports", o->reports, "report JSON files written by `fact tune --report`")->required();
  build->add_option("--out", o->out, "the folder to write")->required();
  build->add_flag("--compile", o->compile,
                  "then compile and link DIR/libfact_ops.so with the Python builder (needs a CUDA torch and nvcc)");
  build->add_option("-j,--jobs", o->jobs, "parallel compiles for --compile (default: all cores)");
  build->callback([o] { realize::build_op_library(*o, std::cout, std::cerr); });
});

}  // namespace
