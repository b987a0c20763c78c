#pragma once
// The composed forward's call of a family op at its pattern's anchor, written by the family
// (KernelFamily::op_call): the op's inputs are the tensors the rule bound in the matched subgraph, its scalars
// (eps, scale, causal) those of the tuned problem, so the module runs exactly what was verified.
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "compose/pattern_verdicts.h"
#include "compose/python_expr.h"
#include "discover/match.h"
#include "ir/graph.h"
#include "realize/kernel_family.h"

namespace fact::compose {

// The indentation of the composed graph's statements: the body of model_new.py's _replay function.
inline constexpr const char* kIndent = "    ";

// The graph node a rule operand variable ("$x") of the match's kernel block was bound to; nullptr if none.
const ir::Node* match_operand(const discover::Match& m, const ir::Graph& g, const char* operand);

// The Python variables the call at the anchor also assigns, one per extra output the match exports (see
// discover::Match::extra_outputs): graph node -> "<out>_<kernel output>", e.g. "add_3" -> "v40_sum".
std::map<std::string, std::string> extra_output_variables(const discover::Match& m, const std::string& out);

// Why the tuned op of `family` with this config cannot stand in for the match, or "" if it can: the op must
// return every extra output the graph reads (a normalization op returns the sum only when its config has
// store_sum). The rule's kernel block maps kernel outputs to pattern nodes ("outputs": {"sum": "sum"}).
std::string unserved_extra_output(const discover::Match& m, const realize::KernelFamily& family,
                                  const nlohmann::json& config);

// Python lines assigning the anchor's value to `out` with one torch.ops.fact call (and, when the match
// exports extra outputs, those to the names of extra_output_variables). Throws Error naming the pattern when
// the rule binds no tensor the op needs, the tuned problem lacks a scalar, or the op does not return an extra
// output the graph reads. With channels_last the op writes its result in that order (compose/channels_last.h).
std::string family_call(const discover::Match& m, const PatternVerdict& v, const ir::Graph& g, const VariableOf& var,
                        const std::string& out, bool channels_last = false);

}  // namespace fact::compose
