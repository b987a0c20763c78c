#pragma once
// Expressions in rule files ("dims" and "constraints"): arithmetic and logic over problem dims,
// bound attrs, arch constants and the shapes of matched values. See docs/rule-format.md.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "ir/graph.h"

namespace fact::discover {

struct ExprNode;

// What an expression's names mean where it is evaluated.
struct ExprContext {
  // A bare identifier (a dim, an attr, an arch constant); nullopt if unknown.
  std::function<std::optional<double>(const std::string& name)> name;
  // "$var" or "@node" -> the tensor it stands for; nullptr if unbound.
  std::function<const ir::TensorMeta*(const std::string& ref)> tensor;
};

class ShapeExpr {
 public:
  // Throws Error naming the text and the position of a syntax error.
  static ShapeExpr parse(const std::string& text);
  // Booleans are 1 and 0. Throws Error naming the text for an unknown name, an unbound ref,
  // a shape index out of range or a division by zero.
  double eval(const ExprContext& ctx) const;
  const std::string& text() const { return text_; }

 private:
  std::shared_ptr<const ExprNode> root_;
  std::string text_;
};

}  // namespace fact::discover
