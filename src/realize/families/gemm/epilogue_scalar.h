#pragma once
// An epilogue tree as C++ float code computing one output element, for kernels that produce their output element
// by element rather than through CUTLASS's visitor trees (the conv family's direct kernel); the sm90 visitor trees
// build their generated activations from the same scalar functors.
#include <string>

#include "realize/families/gemm/epilogue_tree.h"

namespace fact::realize {

// The name of the functor that computes an activation node (with its params) in float: FactAct_<activation>_<hash
// of its text>, equal for equal nodes across kernels.
std::string activation_functor_name(const EpilogueTree& activation);
// One `struct <name>Scalar { float operator()(float x) const; }` per distinct activation node of the tree that
// `all` or the node's own need selects (every activation when all is true, else only those CUTLASS has no functor
// for or that take params): the table's "expr" with the params as float constants. Rendered at global scope after
// templates/cutlass/fp32_activation.hpp.in (the exprs call its fact_act helpers); "" when none is selected.
// cutlass_wrappers: each followed by `template <class T> struct <name> : fact_act::Elementwise<T, <name>Scalar>`,
// the functor shape CUTLASS's epilogues instantiate.
std::string activation_scalar_functors(const EpilogueTree& tree, bool all, bool cutlass_wrappers = false);
// Whether sm90's visitor trees compute the node through a generated functor (no CUTLASS one, or params).
bool activation_needs_generated_functor(const EpilogueTree& node);

// The tree as one float expression over the locals the kernel defines: acc (the accumulator), alpha, bias and vec<i>
// (the values of the bias and of each vector slot that apply to the element: a per-channel one's entry of the
// element's channel, a one-element one's value) and residual (the residual's element). C, beta and column vectors
// have no scalar form here: Error names the node.
std::string scalar_epilogue_expression(const EpilogueTree& tree);

}  // namespace fact::realize
