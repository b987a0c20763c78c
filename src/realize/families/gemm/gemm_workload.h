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

// A grown epilogue (the contract with discover's growth, src/discover/epilogue_growth.h): Match.kernel's
// "epilogue_tree", whose vec<i> slots and residual are bound as operands "vec<i>" / "residual", checked against the
// match's output (the anchor): row vectors hold its N channels along `channel_axis` (the last dim of a GEMM's output,
// dim 1 of a channels-first convolution's), column vectors one value per output row (`rows`), scalars one; the
// residual is shaped like the output; all in its dtype. The GEMM and conv families read their matches with it.
Epilogue grown_epilogue(const discover::Match& match, const ir::Graph& graph, const std::string& what, int64_t rows,
                        int64_t n, const ir::Node* bias, const ir::Node* residual, int channel_axis = -1);

}  // namespace fact::realize
