#pragma once
// A GEMM epilogue as a tree of pointwise nodes over the accumulator (the shape of CUTLASS's epilogue visitor
// trees): leaves fetch the accumulator, a scalar, the source C / residual tile, or a broadcast vector; inner
// nodes apply an activation or a binary op. Plain values, written to and read from a compact JSON form:
//   "acc" | "alpha" | "beta" | <number> | "C" | "residual" | {"row": slot} | {"col": slot} | {"scalar": "vec<i>"}
//   | [activation, x] | [activation, x, {param: number, ...}] | [op, x, y]
// (op: add, sub, mul, div, max, min; activation: data/epilogues/activations.json, with every param it has;
// slot: "bias", the GEMM's own bias, or "vec<i>", i < kMaxEpilogueVectors, FactGemmArgs::vectors[i]).
// e.g. ["relu", ["add", ["mul", "alpha", "acc"], {"row": "bias"}]] is relu(alpha * acc + bias[N]).
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fact::realize {

// FactGemmArgs::vectors' length (FACT_GEMM_MAX_VECTORS of data/families/gemm.json; a test checks they agree).
constexpr int kMaxEpilogueVectors = 8;

enum class EpilogueNodeKind {
  acc,            // the accumulator, alpha-unscaled A @ B (CUTLASS: Sm90AccFetch)
  scalar,         // alpha, beta, or a constant (Sm90ScalarBroadcast)
  source,         // the tile of C (the beta source) or of the residual slot (Sm90SrcFetch)
  row_broadcast,  // a [N] vector broadcast over the rows of D, e.g. a Linear bias (Sm90RowBroadcast)
  col_broadcast,  // a [M] vector broadcast over the columns of D (Sm90ColBroadcast)
  scalar_vector,  // a one-element tensor vec<i> read at run time (Sm90ScalarBroadcast through its pointer)
  activation,     // an activation of the table (Sm90Compute<functor>)
  binary,         // add, sub, mul, div, max, min (Sm90Compute<plus|minus|...>)
};

// The index i of a vector slot "vec<i>" (0 <= i < kMaxEpilogueVectors), or -1 for any other text.
int vector_slot_index(const std::string& slot);

enum class BinaryOp { add, sub, mul, div, max, min };
std::string to_string(BinaryOp op);               // "add", ...
std::string cutlass_functor(BinaryOp op);         // "cutlass::plus", ...

struct EpilogueTree {
  EpilogueNodeKind kind = EpilogueNodeKind::acc;
  // scalar: "alpha", "beta", or "" for a constant; source: "C" or "residual"; broadcasts: the kernel argument
  // slot read ("bias", "vec0"); scalar_vector: its slot ("vec0"); activation: the table name ("relu").
  std::string name;
  double value = 0.0;                  // constant scalars
  std::map<std::string, double> params;  // activation: every param of its table entry (none for relu)
  BinaryOp op = BinaryOp::add;         // binary nodes
  std::vector<EpilogueTree> children;  // activation: 1, binary: 2, leaves: none

  static EpilogueTree acc();
  static EpilogueTree scalar(const std::string& name);  // alpha or beta
  static EpilogueTree constant(double value);
  static EpilogueTree source(const std::string& name);  // C or residual
  static EpilogueTree row(const std::string& slot);      // "bias" or "vec<i>"
  static EpilogueTree col(const std::string& slot);      // "bias" or "vec<i>"
  static EpilogueTree scalar_vector(const std::string& slot);  // "vec<i>"
  // Throws Error unless params gives every param of the activation's table entry and nothing else.
  static EpilogueTree activation(const std::string& name, EpilogueTree x, std::map<std::string, double> params = {});
  static EpilogueTree binary(BinaryOp op, EpilogueTree x, EpilogueTree y);

  bool is_constant() const { return kind == EpilogueNodeKind::scalar && name.empty(); }

  // The compact JSON form (above). from_json throws Error naming the bad node and the accepted forms; an
  // activation must be in the table.
  nlohmann::json to_json() const;
  static EpilogueTree from_json(const nlohmann::json& j);
  // One-line canonical text for keys and messages: relu(add(mul(alpha,acc),row(bias))); constants in
  // shortest round-trip form; params in name order: leaky_relu[negative_slope=0.1](x); scalar(vec0).
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
  bool reads_vector() const;                                 // a row or column broadcast (any slot)
  bool reads_bias() const;                                   // a row or column broadcast of the bias slot
  std::vector<int> vector_slots() const;                     // the i of every vec<i> read, sorted, unique
  bool has_activation() const;
  std::vector<std::string> activations() const;              // the activation names used, sorted, unique
  int node_count() const;
  // The same function with every division by a constant power of two a multiplication by its reciprocal (exact, and
  // in an sm90 visitor tree, where a constant is a run-time argument, a multiply instead of a division guarded by
  // a branch around each element).
  EpilogueTree with_exact_reciprocals() const;

  friend bool operator==(const EpilogueTree& a, const EpilogueTree& b) { return a.text() == b.text(); }
};

}  // namespace fact::realize
