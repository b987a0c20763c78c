#pragma once
// The composed forward's call of a non-GEMM family op (normalization, attention, rope) at its pattern's anchor:
// the op's inputs are the tensors the rule bound in the matched subgraph, its scalars (eps, scale, causal)
// those of the tuned problem, so the module runs exactly what was verified.
#include <string>

#include "compose/pattern_verdicts.h"
#include "compose/python_expr.h"
#include "discover/match.h"
#include "ir/graph.h"

namespace fact::compose {

// The graph node a rule operand variable ("$x") of the match's kernel block was bound to; nullptr if none.
const ir::Node* match_operand(const discover::Match& m, const ir::Graph& g, const char* operand);

// Python lines assigning the anchor's value to `out` with one torch.ops.fact call. Throws Error naming the
// pattern when the rule binds no tensor the op needs or the tuned problem lacks a scalar.
std::string family_call(const discover::Match& m, const PatternVerdict& v, const ir::Graph& g, const VariableOf& var,
                        const std::string& out);

}  // namespace fact::compose
