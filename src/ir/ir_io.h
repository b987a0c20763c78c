#pragma once
// Loading, validating and printing IR files.
#include <filesystem>
#include <string>

#include "ir/graph.h"
#include "ir/op_table.h"

namespace fact::ir {

// Parses and validates; throws Error naming the file, the node and the field at fault.
Graph load_graph(const std::filesystem::path& path, const OpTable& ops);
Graph parse_graph(const Json& doc, const std::string& origin, const OpTable& ops);
Json to_json(const Graph& graph);
// Human-readable listing, one line per node: name = op(args) : dtype[shape].
std::string format_graph(const Graph& graph);

}  // namespace fact::ir
