#include "discover/shape_expr.h"

#include <cctype>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace fact::discover {

// Grammar (lowest precedence first):
//   or: and ("or" and)*      and: not ("and" not)*      not: "not" not | cmp
//   cmp: sum (("=="|"!="|"<"|"<="|">"|">=") sum)?
//   sum: product (("+"|"-") product)*   product: unary (("*"|"/"|"//"|"%") unary)*
//   unary: "-" unary | primary
//   primary: number | true | false | "(" or ")" | name | name "(" or ("," or)* ")"
//          | ref ".shape" "[" or "]" | ref ".rank" | ref ".numel" | numel(ref) | has(ref)
//   (ref: $var for a bound outside value, @id for a pattern node's graph node)
struct ExprNode {
  enum class Kind { Number, Name, Unary, Binary, Call, Shape, Rank, Numel, Has } kind;
  double number = 0;
  std::string text;  // name, operator, function or ref
  std::vector<std::shared_ptr<const ExprNode>> kids;
};

namespace {

using NodePtr = std::shared_ptr<const ExprNode>;

NodePtr make(ExprNode::Kind kind, std::string text, std::vector<NodePtr> kids = {}, double number = 0) {
  auto n = std::make_shared<ExprNode>();
  n->kind = kind;
  n->text = std::move(text);
  n->kids = std::move(kids);
  n->number = number;
  return n;
}

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  NodePtr parse_all() {
    auto n = parse_or();
    skip_space();
    if (pos_ != s_.size()) fail("unexpected '" + s_.substr(pos_, 1) + "'");
    return n;
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;

  [[noreturn]] void fail(const std::string& why) const {
    throw Error("expression '" + s_ + "': " + why + " at position " + std::to_string(pos_));
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(const std::string& tok) {
    skip_space();
    if (s_.compare(pos_, tok.size(), tok) != 0) return false;
    // Keyword operators must not run into an identifier ("order" is not "or" + "der").
    if (std::isalpha(static_cast<unsigned char>(tok[0]))) {
      size_t end = pos_ + tok.size();
      if (end < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_')) return false;
    }
    pos_ += tok.size();
    return true;
  }
  void expect(const std::string& tok) {
    if (!eat(tok)) fail("expected '" + tok + "'");
  }
  std::string identifier() {
    skip_space();
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    if (start == pos_ || std::isdigit(static_cast<unsigned char>(s_[start]))) fail("expected a name");
    return s_.substr(start, pos_ - start);
  }

  NodePtr parse_or() {
    auto left = parse_and();
    while (eat("or") || eat("||")) left = make(ExprNode::Kind::Binary, "or", {left, parse_and()});
    return left;
  }
  NodePtr parse_and() {
    auto left = parse_not();
    while (eat("and") || eat("&&")) left = make(ExprNode::Kind::Binary, "and", {left, parse_not()});
    return left;
  }
  NodePtr parse_not() {
    if (eat("not")) return make(ExprNode::Kind::Unary, "not", {parse_not()});
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == '!' && s_.compare(pos_, 2, "!=") != 0) {
      ++pos_;
      return make(ExprNode::Kind::Unary, "not", {parse_not()});
    }
    return parse_cmp();
  }
  NodePtr parse_cmp() {
    auto left = parse_sum();
    for (const char* op : {"==", "!=", "<=", ">=", "<", ">"})
      if (eat(op)) return make(ExprNode::Kind::Binary, op, {left, parse_sum()});
    return left;
  }
  NodePtr parse_sum() {
    auto left = parse_product();
    for (;;) {
      if (eat("+")) left = make(ExprNode::Kind::Binary, "+", {left, parse_product()});
      else if (eat("-")) left = make(ExprNode::Kind::Binary, "-", {left, parse_product()});
      else return left;
    }
  }
  NodePtr parse_product() {
    auto left = parse_unary();
    for (;;) {
      if (eat("*")) left = make(ExprNode::Kind::Binary, "*", {left, parse_unary()});
      else if (eat("//")) left = make(ExprNode::Kind::Binary, "//", {left, parse_unary()});
      else if (eat("/")) left = make(ExprNode::Kind::Binary, "/", {left, parse_unary()});
      else if (eat("%")) left = make(ExprNode::Kind::Binary, "%", {left, parse_unary()});
      else return left;
    }
  }
  NodePtr parse_unary() {
    if (eat("-")) return make(ExprNode::Kind::Unary, "-", {parse_unary()});
    return parse_primary();
  }
  NodePtr parse_ref_accessor(const std::string& ref) {
    expect(".");
    std::string field = identifier();
    if (field == "shape") {
      expect("[");
      auto index = parse_or();
      expect("]");
      return make(ExprNode::Kind::Shape, ref, {index});
    }
    if (field == "rank") return make(ExprNode::Kind::Rank, ref);
    if (field == "numel") return make(ExprNode::Kind::Numel, ref);
    fail("unknown accessor '." + field + "' (use .shape[i], .rank or .numel)");
  }
  NodePtr parse_primary() {
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end");
    char c = s_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t used = 0;
      double v = std::stod(s_.substr(pos_), &used);
      pos_ += used;
      return make(ExprNode::Kind::Number, "", {}, v);
    }
    if (eat("(")) {
      auto inner = parse_or();
      expect(")");
      return inner;
    }
    if (c == '$' || c == '@') {
      ++pos_;
      std::string ref = std::string(1, c) + identifier();
      return parse_ref_accessor(ref);
    }
    std::string name = identifier();
    if (name == "true") return make(ExprNode::Kind::Number, "", {}, 1);
    if (name == "false") return make(ExprNode::Kind::Number, "", {}, 0);
    if (!eat("(")) return make(ExprNode::Kind::Name, name);
    if (name == "numel" || name == "has") {
      skip_space();
      if (pos_ >= s_.size() || (s_[pos_] != '$' && s_[pos_] != '@')) fail(name + "() takes a $var or @node");
      char sigil = s_[pos_++];
      std::string ref = std::string(1, sigil) + identifier();
      expect(")");
      return make(name == "numel" ? ExprNode::Kind::Numel : ExprNode::Kind::Has, ref);
    }
    std::vector<NodePtr> args{parse_or()};
    while (eat(",")) args.push_back(parse_or());
    expect(")");
    size_t want = (name == "abs" || name == "floor" || name == "ceil") ? 1 : 2;
    if (name != "ceil_div" && name != "min" && name != "max" && want == 2)
      fail("unknown function '" + name + "' (use ceil_div, min, max, abs, floor, ceil, numel, has)");
    if ((name == "min" || name == "max") ? args.size() < 2 : args.size() != want)
      fail("function '" + name + "' takes " + std::to_string(want) + " argument(s)");
    return make(ExprNode::Kind::Call, name, std::move(args));
  }
};

class Evaluator {
 public:
  Evaluator(const std::string& text, const ExprContext& ctx) : text_(text), ctx_(ctx) {}

  double eval(const ExprNode& n) const {
    using K = ExprNode::Kind;
    switch (n.kind) {
      case K::Number: return n.number;
      case K::Name: {
        auto v = ctx_.name ? ctx_.name(n.text) : std::nullopt;
        if (!v) fail("unknown name '" + n.text + "' (not a dim, a bound attr or an arch constant)");
        return *v;
      }
      case K::Unary: {
        double v = eval(*n.kids[0]);
        return n.text == "-" ? -v : (v == 0 ? 1 : 0);
      }
      case K::Binary: return binary(n);
      case K::Call: return call(n);
      case K::Shape: {
        const auto& t = tensor(n.text);
        double raw = eval(*n.kids[0]);
        int64_t i = static_cast<int64_t>(raw);
        if (i < 0) i += t.rank();
        if (i < 0 || i >= t.rank())
          fail(n.text + ".shape[" + std::to_string(static_cast<int64_t>(raw)) + "] is out of range for rank " +
               std::to_string(t.rank()));
        return static_cast<double>(t.shape[static_cast<size_t>(i)]);
      }
      case K::Rank: return static_cast<double>(tensor(n.text).rank());
      case K::Numel: return static_cast<double>(tensor(n.text).numel());
      case K::Has: return ctx_.tensor && ctx_.tensor(n.text) ? 1 : 0;
    }
    return 0;
  }

 private:
  const std::string& text_;
  const ExprContext& ctx_;

  [[noreturn]] void fail(const std::string& why) const { throw Error("expression '" + text_ + "': " + why); }

  const ir::TensorMeta& tensor(const std::string& ref) const {
    const ir::TensorMeta* t = ctx_.tensor ? ctx_.tensor(ref) : nullptr;
    if (!t) fail("'" + ref + "' is not bound to a tensor in this match");
    return *t;
  }

  double binary(const ExprNode& n) const {
    const std::string& op = n.text;
    double a = eval(*n.kids[0]);
    // and/or short-circuit so a guard can protect an accessor that would fail.
    if (op == "and") return a != 0 && eval(*n.kids[1]) != 0 ? 1 : 0;
    if (op == "or") return a != 0 || eval(*n.kids[1]) != 0 ? 1 : 0;
    double b = eval(*n.kids[1]);
    if (op == "+") return a + b;
    if (op == "-") return a - b;
    if (op == "*") return a * b;
    if ((op == "/" || op == "//" || op == "%") && b == 0) fail("division by zero");
    if (op == "/") return a / b;
    if (op == "//") return std::floor(a / b);
    if (op == "%") return a - b * std::floor(a / b);
    if (op == "==") return a == b;
    if (op == "!=") return a != b;
    if (op == "<") return a < b;
    if (op == "<=") return a <= b;
    if (op == ">") return a > b;
    if (op == ">=") return a >= b;
    fail("unknown operator '" + op + "'");
  }

  double call(const ExprNode& n) const {
    std::vector<double> v;
    for (const auto& k : n.kids) v.push_back(eval(*k));
    if (n.text == "ceil_div") {
      if (v[1] == 0) fail("ceil_div by zero");
      return std::ceil(v[0] / v[1]);
    }
    if (n.text == "min") {
      double m = v[0];
      for (double x : v) m = std::min(m, x);
      return m;
    }
    if (n.text == "max") {
      double m = v[0];
      for (double x : v) m = std::max(m, x);
      return m;
    }
    if (n.text == "abs") return std::fabs(v[0]);
    if (n.text == "floor") return std::floor(v[0]);
    if (n.text == "ceil") return std::ceil(v[0]);
    fail("unknown function '" + n.text + "'");
  }
};

}  // namespace

ShapeExpr ShapeExpr::parse(const std::string& text) {
  ShapeExpr e;
  e.text_ = text;
  e.root_ = Parser(text).parse_all();
  return e;
}

double ShapeExpr::eval(const ExprContext& ctx) const {
  if (!root_) throw Error("evaluating an empty expression");
  return Evaluator(text_, ctx).eval(*root_);
}

}  // namespace fact::discover
