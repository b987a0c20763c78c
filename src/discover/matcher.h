#pragma once
// Finds the registry's rules in an IR graph.
#include <functional>
#include <string>
#include <vector>

#include "core/arch_spec.h"
#include "discover/match.h"
#include "discover/pattern_registry.h"
#include "ir/graph.h"
#include "ir/op_table.h"

namespace fact::discover {

// A rule whose pattern matched at a node but one of whose constraints did not hold there: why the node may stay
// PyTorch's (a grouped transposed convolution against conv_transpose's groups == 1).
struct NearMiss {
  std::string node, rule;
  std::string why;  // the constraint and the rule dims it names: "groups == 1 (groups = 4)"
};

// Every match of every applicable rule (matches may overlap). A match requires that intermediates
// (covered nodes other than the anchor) are used only inside the match, and that the rule's dtype,
// arch and constraints hold. A rule that throws on a node is skipped there, with a line in `skipped`; one whose
// constraint fails there is listed in `near_misses`.
std::vector<Match> find_all_matches(const ir::Graph& graph, const PatternRegistry& registry,
                                    const ir::OpTable& ops, const ArchSpec& arch,
                                    std::vector<std::string>* skipped = nullptr,
                                    std::vector<NearMiss>* near_misses = nullptr);

// Keeps a non-overlapping subset: greedily by descending gain (ties: rule priority, then more
// nodes covered, then graph order), dropping any match that shares a node with one already kept.
std::vector<Match> resolve_overlaps(std::vector<Match> matches,
                                    const std::function<double(const Match&)>& gain);

}  // namespace fact::discover
