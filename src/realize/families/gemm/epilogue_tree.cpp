#include "realize/families/gemm/epilogue_tree.h"

#include <algorithm>
#include <cmath>
#include <array>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/enum_names.h"
#include "core/error.h"
#include "realize/families/gemm/epilogue_activations.h"

namespace fact::realize {
namespace {

constexpr std::array<std::pair<BinaryOp, const char*>, 6> kBinaryOps{{
    {BinaryOp::add, "add"}, {BinaryOp::sub, "sub"}, {BinaryOp::mul, "mul"},
    {BinaryOp::div, "div"}, {BinaryOp::max, "max"}, {BinaryOp::min, "min"}}};
// CUTLASS's functors (cutlass/functional.h) for the binary ops, in kBinaryOps' order.
constexpr std::array<std::pair<BinaryOp, const char*>, 6> kBinaryFunctors{{
    {BinaryOp::add, "cutlass::plus"}, {BinaryOp::sub, "cutlass::minus"}, {BinaryOp::mul, "cutlass::multiplies"},
    {BinaryOp::div, "cutlass::divides"}, {BinaryOp::max, "cutlass::maximum"}, {BinaryOp::min, "cutlass::minimum"}}};

constexpr const char* kForms =
    "\"acc\", \"alpha\", \"beta\", a number, \"C\", \"residual\", {\"row\": slot}, {\"col\": slot} (slot \"bias\" "
    "or \"vec0\"..\"vec7\"), {\"scalar\": \"vec<i>\"}, [activation, x], [activation, x, {param: number, ...}] or "
    "[op, x, y] with op add, sub, mul, div, max, min";

void check_slot(const std::string& slot, const char* what) {
  if (slot != "bias" && vector_slot_index(slot) < 0)
    throw Error(fmt::format("epilogue {} of '{}': the kernel's vector slots are bias and vec0..vec{}", what, slot,
                            kMaxEpilogueVectors - 1));
}

bool is_binary_name(const std::string& s) {
  for (auto& [op, name] : kBinaryOps)
    if (s == name) return true;
  return false;
}

std::string number_text(double v) { return fmt::format("{}", v); }

// A node of `kind` naming `name` (a scalar, source or slot), without children.
EpilogueTree named_node(EpilogueNodeKind kind, const std::string& name) {
  EpilogueTree t;
  t.kind = kind;
  t.name = name;
  return t;
}

std::vector<std::string> param_names(const ActivationEntry& a) {
  std::vector<std::string> out;
  for (const auto& [p, v] : a.params) out.push_back(p);
  return out;
}

}  // namespace

int vector_slot_index(const std::string& slot) {
  if (slot.size() != 4 || slot.compare(0, 3, "vec") != 0 || slot[3] < '0' || slot[3] >= '0' + kMaxEpilogueVectors)
    return -1;
  return slot[3] - '0';
}

std::string to_string(BinaryOp op) { return enum_name(kBinaryOps, op); }
std::string cutlass_functor(BinaryOp op) { return enum_name(kBinaryFunctors, op); }

EpilogueTree EpilogueTree::acc() { return {}; }
EpilogueTree EpilogueTree::scalar(const std::string& name) {
  if (name != "alpha" && name != "beta")
    throw Error(fmt::format("epilogue scalar '{}': the kernel's scalars are alpha and beta; write other "
                            "scalars as numbers", name));
  return named_node(EpilogueNodeKind::scalar, name);
}
EpilogueTree EpilogueTree::constant(double value) {
  EpilogueTree t;
  t.kind = EpilogueNodeKind::scalar;
  t.value = value;
  return t;
}
EpilogueTree EpilogueTree::source(const std::string& name) {
  if (name != "C" && name != "residual")
    throw Error(fmt::format("epilogue source '{}': the tensors shaped like D are C and residual", name));
  return named_node(EpilogueNodeKind::source, name);
}
EpilogueTree EpilogueTree::row(const std::string& slot) {
  check_slot(slot, "row broadcast");
  return named_node(EpilogueNodeKind::row_broadcast, slot);
}
EpilogueTree EpilogueTree::col(const std::string& slot) {
  check_slot(slot, "column broadcast");
  return named_node(EpilogueNodeKind::col_broadcast, slot);
}
EpilogueTree EpilogueTree::scalar_vector(const std::string& slot) {
  if (vector_slot_index(slot) < 0)
    throw Error(fmt::format("epilogue scalar of '{}': a run-time scalar is one of the slots vec0..vec{}", slot,
                            kMaxEpilogueVectors - 1));
  return named_node(EpilogueNodeKind::scalar_vector, slot);
}
EpilogueTree EpilogueTree::activation(const std::string& name, EpilogueTree x, std::map<std::string, double> params) {
  const ActivationEntry& a = activation_entry(name);  // throws for a name the table lacks
  const std::vector<std::string> names = param_names(a);
  for (const auto& [p, v] : params)
    if (!a.params.count(p))
      throw Error(fmt::format("activation '{}' has no param '{}'; its params: {}", name, p,
                              names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
  for (const auto& [p, v] : a.params)
    if (!params.count(p))
      throw Error(fmt::format("activation '{}' needs every param given: '{}' is missing (write [\"{}\", x, {{{}: "
                              "<number>}}])", name, p, name, fmt::join(names, ": <number>, ")));
  EpilogueTree t;
  t.kind = EpilogueNodeKind::activation;
  t.name = name;
  t.params = std::move(params);
  t.children.push_back(std::move(x));
  return t;
}
EpilogueTree EpilogueTree::binary(BinaryOp op, EpilogueTree x, EpilogueTree y) {
  EpilogueTree t;
  t.kind = EpilogueNodeKind::binary;
  t.op = op;
  t.children.push_back(std::move(x));
  t.children.push_back(std::move(y));
  return t;
}

EpilogueTree EpilogueTree::with_exact_reciprocals() const {
  EpilogueTree t = *this;
  for (auto& c : t.children) c = c.with_exact_reciprocals();
  if (t.kind != EpilogueNodeKind::binary || t.op != BinaryOp::div || !t.children[1].is_constant()) return t;
  int exponent = 0;
  const double c = t.children[1].value;
  // A power of two whose reciprocal is a normal float: both are exact in fp32.
  if (!std::isfinite(c) || std::fabs(std::frexp(c, &exponent)) != 0.5 || exponent < -125 || exponent > 126) return t;
  return binary(BinaryOp::mul, std::move(t.children[0]), constant(1.0 / c));
}

nlohmann::json EpilogueTree::to_json() const {
  switch (kind) {
    case EpilogueNodeKind::acc: return "acc";
    case EpilogueNodeKind::scalar: return name.empty() ? nlohmann::json(value) : nlohmann::json(name);
    case EpilogueNodeKind::source: return name;
    case EpilogueNodeKind::row_broadcast: return {{"row", name}};
    case EpilogueNodeKind::col_broadcast: return {{"col", name}};
    case EpilogueNodeKind::scalar_vector: return {{"scalar", name}};
    case EpilogueNodeKind::activation:
      if (params.empty()) return nlohmann::json::array({name, children[0].to_json()});
      return nlohmann::json::array({name, children[0].to_json(), nlohmann::json(params)});
    case EpilogueNodeKind::binary:
      return nlohmann::json::array({to_string(op), children[0].to_json(), children[1].to_json()});
  }
  return nullptr;
}

EpilogueTree EpilogueTree::from_json(const nlohmann::json& j) {
  if (j.is_number()) return constant(j.get<double>());
  if (j.is_string()) {
    std::string s = j;
    if (s == "acc") return acc();
    if (s == "alpha" || s == "beta") return scalar(s);
    if (s == "C" || s == "residual") return source(s);
    throw Error(fmt::format("epilogue tree leaf '{}': use one of {}", s, kForms));
  }
  if (j.is_object() && j.size() == 1 && j.begin()->is_string()) {
    if (j.contains("row")) return row(j["row"]);
    if (j.contains("col")) return col(j["col"]);
    if (j.contains("scalar")) return scalar_vector(j["scalar"]);
  }
  if (j.is_array() && !j.empty() && j[0].is_string()) {
    std::string head = j[0];
    if (is_binary_name(head)) {
      if (j.size() != 3)
        throw Error(fmt::format("epilogue tree node {}: [\"{}\", x, y] takes two operands", j.dump(), head));
      return binary(parse_enum(kBinaryOps, head, "binary op"), from_json(j[1]), from_json(j[2]));
    }
    if (j.size() != 2 && !(j.size() == 3 && j[2].is_object()))
      throw Error(fmt::format("epilogue tree node {}: an activation [\"{}\", x] takes one operand and, when it has "
                              "params, an object {{param: number}}", j.dump(), head));
    std::map<std::string, double> params;
    if (j.size() == 3)
      for (const auto& [p, v] : j[2].items()) {
        if (!v.is_number())
          throw Error(fmt::format("epilogue tree node {}: param '{}' of activation '{}' is {}, not a number",
                                  j.dump(), p, head, v.dump()));
        params[p] = v.get<double>();
      }
    activation_entry(head);  // an unknown name: the table's own message
    EpilogueTree x = from_json(j[1]);
    try {
      return activation(head, std::move(x), std::move(params));
    } catch (const Error& e) {
      throw Error(fmt::format("epilogue tree node {}: {}", j.dump(), e.what()));
    }
  }
  throw Error(fmt::format("epilogue tree node {}: use one of {}", j.dump(), kForms));
}

std::string EpilogueTree::text() const {
  switch (kind) {
    case EpilogueNodeKind::acc: return "acc";
    case EpilogueNodeKind::scalar: return name.empty() ? number_text(value) : name;
    case EpilogueNodeKind::source: return name;
    case EpilogueNodeKind::row_broadcast: return "row(" + name + ")";
    case EpilogueNodeKind::col_broadcast: return "col(" + name + ")";
    case EpilogueNodeKind::scalar_vector: return "scalar(" + name + ")";
    case EpilogueNodeKind::activation: {
      // Param-less nodes keep their text, so existing names, config ids and tuning keys stay as they were.
      if (params.empty()) return name + "(" + children[0].text() + ")";
      std::string p;
      for (const auto& [k, v] : params) p += (p.empty() ? "" : ",") + k + "=" + number_text(v);
      return name + "[" + p + "](" + children[0].text() + ")";
    }
    case EpilogueNodeKind::binary:
      return fmt::format("{}({},{})", to_string(op), children[0].text(), children[1].text());
  }
  return "?";
}

bool EpilogueTree::reads_source(const std::string& source_name) const {
  return any([&](const EpilogueTree& t) { return t.kind == EpilogueNodeKind::source && t.name == source_name; });
}
bool EpilogueTree::reads_vector() const {
  return any([](const EpilogueTree& t) {
    return t.kind == EpilogueNodeKind::row_broadcast || t.kind == EpilogueNodeKind::col_broadcast;
  });
}
bool EpilogueTree::reads_bias() const {
  return any([](const EpilogueTree& t) {
    return (t.kind == EpilogueNodeKind::row_broadcast || t.kind == EpilogueNodeKind::col_broadcast) && t.name == "bias";
  });
}
std::vector<int> EpilogueTree::vector_slots() const {
  std::vector<int> slots;
  any([&](const EpilogueTree& t) {
    if ((t.kind == EpilogueNodeKind::row_broadcast || t.kind == EpilogueNodeKind::col_broadcast ||
         t.kind == EpilogueNodeKind::scalar_vector) && vector_slot_index(t.name) >= 0)
      slots.push_back(vector_slot_index(t.name));
    return false;
  });
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  return slots;
}
int EpilogueTree::node_count() const {
  int n = 0;
  any([&](const EpilogueTree&) { return ++n, false; });
  return n;
}
bool EpilogueTree::has_activation() const {
  return any([](const EpilogueTree& t) { return t.kind == EpilogueNodeKind::activation; });
}
std::vector<std::string> EpilogueTree::activations() const {
  std::vector<std::string> names;
  any([&](const EpilogueTree& t) {
    if (t.kind == EpilogueNodeKind::activation) names.push_back(t.name);
    return false;
  });
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace fact::realize
