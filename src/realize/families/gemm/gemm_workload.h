#pragma once
// From a plan entry of the GEMM family to the GemmProblem stage 2 tunes: operands from the rule's
// kernel block, layouts and leading dimensions from the IR's strides, dtypes from the numerics mode.
#include "discover/match.h"
#include "ir/graph.h"
#include "realize/families/gemm/gemm_problem.h"

namespace fact::realize {

// Throws Error naming the match and the reason when the kernel cannot take it (an operand that is
// neither row- nor column-major, leading dims that do not fold into M, an epilogue not generated yet);
// the pattern then stays with PyTorch.
GemmProblem gemm_problem_from_match(const discover::Match& match, const ir::Graph& graph, Numerics numerics, Arch arch);

}  // namespace fact::realize
