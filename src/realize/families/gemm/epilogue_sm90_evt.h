#pragma once
// CUTLASS 3.x epilogue visitor trees (fusion::Sm90EVT) from FACT epilogue trees: the fusion type the sm90
// collective builder takes and the nested arguments that configure it. Spelled with the aliases that the sm90
// kernel templates declare (fusion, ScalarStride, RowStride, ColStride, kAlignmentBias, kRound, ElementC, ...).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "realize/families/gemm/epilogue_tree.h"

namespace fact::realize {

// Why sm90 cannot run the tree (a leaf as root, C and the residual both read, a slot read as two kinds of
// broadcast, over 64 nodes), nullopt when it can.
std::optional<std::string> sm90_evt_rejection(const EpilogueTree& tree);
// The fusion::Sm90EVT<...> type; fp32_accurate picks FACT's activation functors where the table has them.
// An add whose first operand is a mul becomes one homogeneous_multiply_add node, as in CUTLASS's own trees.
// transposed: the kernel computes D^T (FACT's transposed problems), so the caller's row vectors are its column
// vectors and the other way round.
std::string sm90_evt_type(const EpilogueTree& tree, bool fp32_accurate, bool transposed = false);
// The braced initializer of that type's Arguments, reading FactGemmArgs `a` and the local float `beta`.
// vec<i> leaves read FactGemmArgs::vectors[i]; a column vector has one value per row of each batch.
std::string sm90_evt_arguments(const EpilogueTree& tree, bool transposed = false);
// The functors that the tree's activations without a CUTLASS functor, or with params, compute with: one
// template <class T> struct per distinct (activation, params) computing the table's "expr" in float, the params
// as float constants, named FactAct_<activation>_<hash of its text>. Rendered at global scope after
// templates/cutlass/fp32_activation.hpp.in (they build on fact_act::Elementwise); "" when the tree needs none.
std::string sm90_evt_functors(const EpilogueTree& tree);

// The vec<i> slots the tree reads, in slot order, with the broadcast kind of each.
std::vector<std::pair<int, EpilogueNodeKind>> vector_slot_kinds(const EpilogueTree& tree);
// can_implement's checks of the vec<i> slots the tree reads (the sm90 templates' vector_checks; "" without any):
// each set, as a null slot would read as zeros; a row vector aligned for the broadcast's vector loads (the
// templates' aligned(), kAlignmentBias and ElementBias).
std::string sm90_vector_checks(const EpilogueTree& tree, bool transposed = false);

}  // namespace fact::realize
