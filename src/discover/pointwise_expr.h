#pragma once
// Reads one IR op node as a node of an elementwise expression tree (the compact epilogue-tree JSON of
// src/realize/families/gemm/epilogue_tree.h), from the one list of pointwise ops, data/ir/pointwise_ops.json,
// and the activations' parameters, data/epilogues/activations.json.
#include <functional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace fact::discover {

// The node (or one of its operands) cannot be part of an elementwise expression; what() is the reason,
// a phrase for a plan note ("a reduction (row-wise kernel)").
class NotPointwise : public std::runtime_error {
 public:
  explicit NotPointwise(const std::string& why) : std::runtime_error(why) {}
};

// Turns a tensor argument of the node (an IR ref) into the expression of its value; throws NotPointwise
// when that value cannot be read there (e.g. a tensor broadcast the epilogue has no leaf for). A ref with
// "channel_dim": d is a 1-D tensor that broadcasts along dim d of the output (BatchNorm's statistics over an
// [n, c, ...] input), not along the last dim as PyTorch's broadcasting would put it.
using OperandTree = std::function<nlohmann::json(const nlohmann::json& ref)>;

// Whether pointwise_ops.json lists the node's op at all.
bool is_listed_pointwise(const ir::Node& node);

// The expression the node computes, with its tensor arguments read through `operand` and its literal
// arguments as numbers. Activation nodes carry every parameter of the activation ([name, x, {param: v}]),
// parameterless ones are [name, x]. Throws NotPointwise naming why the node is not pointwise here (dropout in
// training, a parameter given as a tensor, BatchNorm over a 1-D input, an op the table does not list).
// Throws Error when a data file is malformed.
nlohmann::json pointwise_tree(const ir::Node& node, const OperandTree& operand);

// [name, x], or [name, x, {param: default}] for an activation with parameters (its defaults in
// data/epilogues/activations.json). Throws Error for an activation the table lacks.
nlohmann::json activation_tree(const std::string& name, nlohmann::json x);

}  // namespace fact::discover
