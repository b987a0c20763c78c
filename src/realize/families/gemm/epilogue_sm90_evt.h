#pragma once
// CUTLASS 3.x epilogue visitor trees (fusion::Sm90EVT) from FACT epilogue trees: the fusion type the sm90
// collective builder takes and the nested arguments that configure it. Spelled with the aliases that the sm90
// kernel templates declare (fusion, ScalarStride, RowStride, ColStride, kAlignmentBias, kRound, ElementC, ...).
#include <optional>
#include <string>

#include "realize/families/gemm/epilogue_tree.h"

namespace fact::realize {

// Why sm90 cannot run the tree (a leaf as root, C and the residual both read, bias read as row and column),
// nullopt when it can.
std::optional<std::string> sm90_evt_rejection(const EpilogueTree& tree);
// The fusion::Sm90EVT<...> type; fp32_accurate picks FACT's activation functors where the table has them.
// An add whose first operand is a mul becomes one homogeneous_multiply_add node, as in CUTLASS's own trees.
std::string sm90_evt_type(const EpilogueTree& tree, bool fp32_accurate);
// The braced initializer of that type's Arguments, reading FactGemmArgs `a` and the local float `beta`.
std::string sm90_evt_arguments(const EpilogueTree& tree);

}  // namespace fact::realize
