#pragma once
// A row-wise op chain no rule covers: a connected set of elementwise / reduction nodes with one value leaving
// it, every tensor in it shaped like the full tensor (cols the product of the adjacent dims its reductions
// fold, the last dim without one) or one value per row (those dims kept as 1, or dropped), and its outside
// inputs either full, one value per row, or, when the reduced dims are the trailing ones, one row ([cols] / those
// dims, broadcast).
// Reduced dims with others behind them (channels of [N, C, H, W]) make strided rows: `inner` elements apart. Such a chain
// is what a kernel with the FactRowwiseArgs ABI (kernel_abi.h, data/families/rowwise.json) can realize: one
// the agent registered or one generated from the IR (row_program.h).
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace fact::discover {

struct Plan;

struct RowwiseFragment {
  std::vector<std::string> nodes;    // graph order
  std::string output;                // the node whose value leaves the fragment
  std::vector<std::string> inputs;   // outside tensor values, in order of first use ($in0, $in1, ...)
  std::vector<bool> broadcast;       // parallel to inputs: true for a [cols] row shared by every row, or a channel input
  std::vector<int64_t> channels;     // parallel to inputs: C for a per-channel input (read by channel), else 0
  std::vector<bool> window;          // parallel to inputs: read only by a pool (its window pooled where it is loaded)
  std::vector<bool> boolean;         // parallel to inputs: a bool tensor (a mask), read as 1 or 0
  std::vector<bool> per_row;         // parallel to inputs: one value per row (the reduced dims kept as 1 or dropped)
  std::vector<bool> index;           // parallel to inputs: an int64 per-row tensor, a gather's index
  int64_t channel_inner = 1;         // elements of one channel's plane: the product of the dims after dim 1
  int64_t groups = 1;                // rows per leading position of the reduced dims (group_norm's groups)
  int64_t rows = 0, cols = 0;
  std::string dtype;                 // of the output
  std::vector<int64_t> full_shape;   // the full tensor's shape (rows x cols elements)
  int trailing_dims = 1;             // how many dims of full_shape make a row (the reduced ones)
  int inner_dims = 0;                // how many dims of full_shape follow them
  int64_t inner = 1;                 // their element count: the stride between a row's elements
};

inline constexpr int kRowwiseMaxInputs = 8;  // FACT_ROWWISE_MAX_INPUTS in data/families/rowwise.json (a test checks)

// Checks that `nodes` form a row-wise fragment of `graph` outside `covered`; throws Error naming the node
// and the reason (these messages go back to the LLM when it proposes a bad fragment).
RowwiseFragment make_rowwise_fragment(const ir::Graph& graph, const std::vector<std::string>& nodes,
                                      const std::set<std::string>& covered);

// The plan's uncovered op nodes grouped into maximal connected row-wise candidates (those that pass
// make_rowwise_fragment with contiguous rows, the registered kernels' ABI), in graph order.
// Nodes covered by a generated row-wise entry (rule kGeneratedRowwiseRule) count as free: the agent may
// replace a generated kernel with one it writes.
std::vector<RowwiseFragment> rowwise_candidates(const Plan& plan);

inline constexpr const char* kGeneratedRowwiseRule = "rowwise_generated";

// The fragment as a rule in data/rules format (docs/rule-format.md): the nodes become the pattern,
// outside values become $in0.., literals stay literals; family "rowwise", kernel.registry_entry = name.
nlohmann::json fragment_rule(const ir::Graph& graph, const RowwiseFragment& f, const std::string& name,
                             const std::string& arch, const std::string& description);

// What the verification harness replays in float64: the fragment's IR nodes, inputs, shapes.
nlohmann::json fragment_to_json(const ir::Graph& graph, const RowwiseFragment& f);

}  // namespace fact::discover
