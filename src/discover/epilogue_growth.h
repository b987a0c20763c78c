#pragma once
// Region growth: a GEMM or convolution match of the plan takes over the pointwise ops that follow it in the graph
// (a convolution's per-channel vectors [K, 1, 1] are its row vectors), as long as
// one value leaves the region, and carries them as its epilogue tree (the discover side of the contract in
// docs/rule-format.md "Grown GEMM epilogues"):
//   kernel.epilogue_tree  the rule's tree without beta * C, grown; leaves {"row"|"col"|"scalar": "vec<i>"} and
//                         "residual" read graph tensors bound in inputs as "$vec<i>" / "$residual";
//   kernel.operands       the rule's, plus "vec<i>": "$vec<i>" and "residual": "$residual" for the slots read;
//   kernel.epilogue_grown_over  the graph nodes taken over (for the plan table);
//   nodes / anchor        the covered nodes and the region's one live-out.
#include <set>
#include <string>
#include <vector>

#include "discover/match.h"
#include "ir/graph.h"

namespace fact::discover {

inline constexpr int kMaxEpilogueVectors = 8;     // FACT_GEMM_MAX_VECTORS
inline constexpr int kMaxEpilogueTreeNodes = 64;

// Grows every GEMM match of `matches` (non-overlapping, as resolve_overlaps keeps them) over the following
// uncovered pointwise ops of data/ir/pointwise_ops.json. Appends one note per GEMM whose growth stopped at a
// following op that could not join (and why). Matches that did not grow are left byte-identical.
void grow_gemm_epilogues(std::vector<Match>& matches, const ir::Graph& graph, std::vector<std::string>* notes);

// The tree the rule's kernel block computes, without the beta * C term (compact epilogue-tree JSON); null for a
// kernel block whose epilogue is not grown (SwiGLU, a residual add).
nlohmann::json starting_epilogue_tree(const Match& match);

}  // namespace fact::discover
