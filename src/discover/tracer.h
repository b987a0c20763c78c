#pragma once
// Stage 1 entry: runs the Python tracer (python -m fact.trace, behind fact.trace_cache) on a KernelBench-style file
// and loads the IR.
#include <filesystem>

#include "ir/graph.h"
#include "ir/op_table.h"

namespace fact::discover {

// Writes the IR to `ir_out` and returns it validated. Throws Error with the tracer's own message
// for bad input (no Model, untraceable module, ...) and leaves no IR file behind.
ir::Graph trace_module(const std::filesystem::path& model_file, const std::filesystem::path& ir_out,
                       const ir::OpTable& ops);

}  // namespace fact::discover
