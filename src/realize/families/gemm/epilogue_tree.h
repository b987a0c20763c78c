#pragma once
// A GEMM epilogue as a tree of pointwise nodes over the accumulator (the shape of CUTLASS's epilogue visitor
// trees): leaves fetch the accumulator, a scalar, the source C / residual tile, or a broadcast vector; inner
// nodes apply an activation or a binary op. Plain values, written to and read from a compact JSON form:
//   "acc" | "alpha" | "beta" | <number> | "C" | "residual" | {"row": "bias"} | {"col": "bias"}
//   | [activation, x] | [op, x, y]   (op: add, sub, mul, div, max, min; activation: data/epilogues/activations.json)
// e.g. ["relu", ["add", ["mul", "alpha", "acc"], {"row": "bias"}]] is relu(alpha * acc + bias[N]).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fact::realize {

enum class EpilogueNodeKind {
  acc,            // the accumulator, alpha-unscaled A @ B (CUTLASS: Sm90AccFetch)
  scalar,         // alpha, beta, or a constant (Sm90ScalarBroadcast)
  source,         // the tile of C (the beta source) or of the residual slot (Sm90SrcFetch)
  row_broadcast,  // a [N] vector broadcast over the rows of D, e.g. a Linear bias (Sm90RowBroadcast)
  col_broadcast,  // a [M] vector broadcast over the columns of D (Sm90ColBroadcast)
  activation,     // an activation of the table (Sm90Compute<functor>)
  binary,         // add, sub, mul, div, max, min (Sm90Compute<plus|minus|...>)
};

enum class BinaryOp { add, sub, mul, div, max, min };
std::string to_string(BinaryOp op);               // "add", ...
std::string cutlass_functor(BinaryOp op);         // "cutlass::plus", ...

struct EpilogueTree {
  EpilogueNodeKind kind = EpilogueNodeKind::acc;
  // scalar: "alpha", "beta", or "" for a constant; source: "C" or "residual"; broadcasts: the kernel argument
  // slot read ("bias"); activation: the table name ("relu").
  std::string name;
  double value = 0.0;                  // constant scalars
  BinaryOp op = BinaryOp::add;         // binary nodes
  std::vector<EpilogueTree> children;  // activation: 1, binary: 2, leaves: none

  static EpilogueTree acc();
  static EpilogueTree scalar(const std::string& name);  // alpha or beta
  static EpilogueTree constant(double value);
  static EpilogueTree source(const std::string& name);  // C or residual
  static EpilogueTree row(const std::string& slot);
  static EpilogueTree col(const std::string& slot);
  static EpilogueTree activation(const std::string& name, EpilogueTree x);
  static EpilogueTree binary(BinaryOp op, EpilogueTree x, EpilogueTree y);

  bool is_constant() const { return kind == EpilogueNodeKind::scalar && name.empty(); }

  // The compact JSON form (above). from_json throws Error naming the bad node and the accepted forms; an
  // activation must be in the table.
  nlohmann::json to_json() const;
  static EpilogueTree from_json(const nlohmann::json& j);
  // One-line canonical text for keys and messages: relu(add(mul(alpha,acc),row(bias))); constants in
  // shortest round-trip form.
  std::string text() const;

  // Whether any node satisfies pred (this node included).
  template <class Pred>
  bool any(Pred pred) const {
    if (pred(*this)) return true;
    for (const auto& c : children)
      if (c.any(pred)) return true;
    return false;
  }
  bool reads_source(const std::string& name) const;         // a source node of that name
  bool reads_vector() const;                                 // a row or column broadcast
  bool has_activation() const;
  std::vector<std::string> activations() const;              // the activation names used, sorted, unique

  friend bool operator==(const EpilogueTree& a, const EpilogueTree& b) { return a.text() == b.text(); }
};

}  // namespace fact::realize
