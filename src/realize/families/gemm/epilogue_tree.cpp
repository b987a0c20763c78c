#include "realize/families/gemm/epilogue_tree.h"

#include <algorithm>
#include <array>
#include <utility>

#include <fmt/format.h>

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
    "\"acc\", \"alpha\", \"beta\", a number, \"C\", \"residual\", {\"row\": \"bias\"}, {\"col\": \"bias\"}, "
    "[activation, x] or [op, x, y] with op add, sub, mul, div, max, min";

bool is_binary_name(const std::string& s) {
  for (auto& [op, name] : kBinaryOps)
    if (s == name) return true;
  return false;
}

std::string number_text(double v) { return fmt::format("{}", v); }

}  // namespace

std::string to_string(BinaryOp op) { return enum_name(kBinaryOps, op); }
std::string cutlass_functor(BinaryOp op) { return enum_name(kBinaryFunctors, op); }

EpilogueTree EpilogueTree::acc() { return {}; }
EpilogueTree EpilogueTree::scalar(const std::string& name) {
  if (name != "alpha" && name != "beta")
    throw Error(fmt::format("epilogue scalar '{}': the kernel's scalars are alpha and beta; write other "
                            "scalars as numbers", name));
  EpilogueTree t;
  t.kind = EpilogueNodeKind::scalar;
  t.name = name;
  return t;
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
  EpilogueTree t;
  t.kind = EpilogueNodeKind::source;
  t.name = name;
  return t;
}
EpilogueTree EpilogueTree::row(const std::string& slot) {
  if (slot != "bias")
    throw Error(fmt::format("epilogue row broadcast of '{}': the kernel's vector slot is bias", slot));
  EpilogueTree t;
  t.kind = EpilogueNodeKind::row_broadcast;
  t.name = slot;
  return t;
}
EpilogueTree EpilogueTree::col(const std::string& slot) {
  if (slot != "bias")
    throw Error(fmt::format("epilogue column broadcast of '{}': the kernel's vector slot is bias", slot));
  EpilogueTree t;
  t.kind = EpilogueNodeKind::col_broadcast;
  t.name = slot;
  return t;
}
EpilogueTree EpilogueTree::activation(const std::string& name, EpilogueTree x) {
  activation_entry(name);  // throws for a name the table lacks
  EpilogueTree t;
  t.kind = EpilogueNodeKind::activation;
  t.name = name;
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

nlohmann::json EpilogueTree::to_json() const {
  switch (kind) {
    case EpilogueNodeKind::acc: return "acc";
    case EpilogueNodeKind::scalar: return name.empty() ? nlohmann::json(value) : nlohmann::json(name);
    case EpilogueNodeKind::source: return name;
    case EpilogueNodeKind::row_broadcast: return {{"row", name}};
    case EpilogueNodeKind::col_broadcast: return {{"col", name}};
    case EpilogueNodeKind::activation: return nlohmann::json::array({name, children[0].to_json()});
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
  if (j.is_object() && j.size() == 1 && (j.contains("row") || j.contains("col")) && j.begin()->is_string())
    return j.contains("row") ? row(j["row"]) : col(j["col"]);
  if (j.is_array() && !j.empty() && j[0].is_string()) {
    std::string head = j[0];
    if (is_binary_name(head)) {
      if (j.size() != 3)
        throw Error(fmt::format("epilogue tree node {}: [\"{}\", x, y] takes two operands", j.dump(), head));
      return binary(parse_enum(kBinaryOps, head, "binary op"), from_json(j[1]), from_json(j[2]));
    }
    if (j.size() != 2)
      throw Error(fmt::format("epilogue tree node {}: an activation [\"{}\", x] takes one operand", j.dump(), head));
    return activation(head, from_json(j[1]));
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
    case EpilogueNodeKind::activation: return name + "(" + children[0].text() + ")";
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
