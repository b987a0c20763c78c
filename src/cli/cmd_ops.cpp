// `fact ops build REPORT.json... --out DIR [--compile]`: the tuned winners as PyTorch custom ops
// (torch.ops.fact.gemm_<id>; torch.ops.fact.<config id> for the normalization and attention families). Writes
// the op library folder; --compile hands it to the Python builder, which needs the GPU machine's torch (a CUDA
// build) and links DIR/libfact_ops.so.
// `fact ops abi-header [--out FILE]`: the kernel_abi.h the kernels and ops.cpp include, rendered from the data
// (for hand-written kernels, scripts and the tests that check the ctypes mirror against it).
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "core/files.h"
#include "realize/kernel_abi_header.h"
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
  auto header_out = std::make_shared<std::string>();
  auto* header = ops->add_subcommand("abi-header", "print kernel_abi.h, the C ABI every kernel exports (rendered from "
                                                   "data/kernel_abi.json and data/families/*.json)");
  header->add_option("--out", *header_out, "write it to this file instead");
  header->callback([header_out] {
    if (header_out->empty()) std::cout << realize::kernel_abi_header();
    else write_file_atomic(*header_out, realize::kernel_abi_header());
  });
});

}  // namespace
