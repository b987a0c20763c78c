#include "discover/pointwise_expr.h"

#include <cmath>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"

namespace fact::discover {
using nlohmann::json;
namespace {

constexpr const char* kOpsFile = "ir/pointwise_ops.json";
constexpr const char* kActivationsFile = "epilogues/activations.json";

const json& ops_table() {
  static const json table = [] {
    json j = read_json_file(data_dir() / kOpsFile, "pointwise op table");
    if (!j.contains("ops") || !j["ops"].is_object())
      throw Error(fmt::format("{}: expected an object \"ops\" of aten overload -> form", (data_dir() / kOpsFile).string()));
    return j["ops"];
  }();
  return table;
}

const json& activations() {
  static const json table = [] {
    json j = read_json_file(data_dir() / kActivationsFile, "activation table");
    if (!j.contains("activations") || !j["activations"].is_object())
      throw Error(fmt::format("{}: expected an object \"activations\"", (data_dir() / kActivationsFile).string()));
    return j["activations"];
  }();
  return table;
}

// An argument by position, else by kwarg name; nullopt when the node gives neither.
std::optional<json> argument(const ir::Node& node, const json& index, const std::string& kwarg) {
  if (index.is_number_integer()) {
    auto i = index.get<size_t>();
    if (i < node.args.size()) return node.args[i];
  }
  if (!kwarg.empty() && node.kwargs.contains(kwarg)) return node.kwargs[kwarg];
  return std::nullopt;
}

// A literal number argument ("what" names it in the reason).
double number(const json& v, const std::string& what) {
  if (v.is_number()) return v.get<double>();
  if (ir::is_ref(v)) throw NotPointwise(fmt::format("its {} is a tensor, not a constant", what));
  throw NotPointwise(fmt::format("its {} is {}, not a finite number", what, v.dump()));
}

json activation_node(const std::string& name, json x, const ir::Node& node, const json& param_args) {
  if (!activations().contains(name))
    throw Error(fmt::format("data/{} names activation '{}' for {}, which data/{} lacks", kOpsFile, name, node.op,
                            kActivationsFile));
  const json& params = activations()[name].value("params", json::object());
  if (params.empty()) return json::array({name, std::move(x)});
  json values = json::object();
  for (const auto& [p, def] : params.items()) {
    std::optional<json> v = argument(node, param_args.value(p, json()), p);
    values[p] = (v && !v->is_null()) ? number(*v, "parameter " + p) : def.get<double>();
  }
  return json::array({name, std::move(x), std::move(values)});
}

json binary_node(const json& form, const ir::Node& node, const OperandTree& operand) {
  auto read = [&](size_t i) -> json {
    if (i >= node.args.size()) throw NotPointwise(fmt::format("it has no argument {}", i));
    const json& a = node.args[i];
    if (ir::is_ref(a)) return operand(a);
    return number(a, fmt::format("argument {}", i));
  };
  json x = read(0), y = read(1);
  double scale = 1.0;
  if (form.contains("scale")) {
    const json& s = form["scale"];
    std::optional<json> v = argument(node, s.value("arg", json()), s.value("kwarg", ""));
    scale = (v && !v->is_null()) ? number(*v, "alpha") : s.value("default", 1.0);
  }
  if (scale != 1.0) y = json::array({"mul", std::move(y), scale});
  if (form.value("swap", false)) std::swap(x, y);
  return json::array({form["binary"], std::move(x), std::move(y)});
}

// min(max(x, lo), hi); a missing, null or infinite bound is left out.
json clamp_node(const json& form, const ir::Node& node, json x, const OperandTree& operand) {
  auto bound = [&](const char* key, const char* op, json inner) -> json {
    if (!form.contains(key)) return inner;
    std::optional<json> v = argument(node, form[key], key);
    if (!v || v->is_null()) return inner;
    if (v->is_object() && v->contains("float")) {
      std::string f = (*v)["float"].get<std::string>();
      if ((f == "inf" && std::string(op) == "min") || (f == "-inf" && std::string(op) == "max")) return inner;
      throw NotPointwise(fmt::format("its {} bound is {}", key, f));
    }
    json b = ir::is_ref(*v) ? operand(*v) : json(number(*v, std::string(key) + " bound"));
    return json::array({op, std::move(inner), std::move(b)});
  };
  return bound("max", "min", bound("min", "max", std::move(x)));
}

// (x - running_mean) * rsqrt(running_var + eps) * weight + bias, in eval mode over dim 1 of x (rsqrt, not a division by
// a square root: a kernel evaluates the tree per element, and an IEEE root and division cost a BN conv's epilogue 15% on
// the H100, docs/perf-notes.md item 25). Its [C] vectors
// broadcast along dim 1, which for an x of more than 2 dims is not where PyTorch's broadcasting puts a [C] tensor:
// their refs then carry "channel_dim": 1 for the operand reader to honour (or refuse).
json batch_norm_node(const json& form, const ir::Node& node, json x, const OperandTree& operand) {
  std::optional<json> training = argument(node, form.value("training", json()), "training");
  if (!training || *training != false) throw NotPointwise("BatchNorm in training mode (batch statistics: a reduction)");
  if (node.outputs.empty() || node.outputs[0].rank() < 2)
    throw NotPointwise("BatchNorm over an input of fewer than 2 dims");
  const bool channels_inside = node.outputs[0].rank() > 2;
  auto vec = [&](const char* key) -> json {
    std::optional<json> v = argument(node, form.value(key, json()), key);
    if (!v || v->is_null()) return nullptr;
    if (!ir::is_ref(*v)) throw NotPointwise(fmt::format("its {} is {}, not a tensor", key, v->dump()));
    json ref = *v;
    if (channels_inside) ref["channel_dim"] = 1;
    return operand(ref);
  };
  json mean = vec("running_mean"), var = vec("running_var");
  if (mean.is_null() || var.is_null()) throw NotPointwise("BatchNorm without running statistics");
  std::optional<json> eps_arg = argument(node, form.value("eps", json()), "eps");
  double eps = eps_arg ? number(*eps_arg, "eps") : 1e-5;
  json t = json::array({"mul", json::array({"sub", std::move(x), std::move(mean)}),
                        activation_tree("rsqrt", json::array({"add", std::move(var), eps}))});
  if (json w = vec("weight"); !w.is_null()) t = json::array({"mul", std::move(t), std::move(w)});
  if (json b = vec("bias"); !b.is_null()) t = json::array({"add", std::move(t), std::move(b)});
  return t;
}

// Whether tree t has pattern's shape (activations.json "written_out"): "$x" binds a subtree (equal wherever it recurs),
// a commutative binary op matches its operands either way round, anything else must be equal (numbers by value).
bool matches(const json& pattern, const json& t, json& x) {
  if (pattern == "$x") {
    if (x.is_null()) x = t;
    return x == t;
  }
  if (!pattern.is_array()) return pattern == t;
  if (!t.is_array() || t.size() != pattern.size() || t.empty() || pattern[0] != t[0]) return false;
  json bound = x;
  bool in_order = true;
  for (size_t i = 1; i < t.size() && in_order; ++i) in_order = matches(pattern[i], t[i], bound);
  if (in_order) {
    x = bound;
    return true;
  }
  static const std::set<std::string> commutative = {"add", "mul", "max", "min"};
  if (t.size() != 3 || !t[0].is_string() || !commutative.count(t[0].get<std::string>())) return false;
  bound = x;
  if (!matches(pattern[1], t[2], bound) || !matches(pattern[2], t[1], bound)) return false;
  x = bound;
  return true;
}

// t, or the activation t spells out in other ops (Mish as x * tanh(softplus(x))), whose kernel is cheaper and
// rounds once.
json folded_activation(json t) {
  for (const auto& [name, a] : activations().items()) {
    for (const json& pattern : a.value("written_out", json::array())) {
      json x;
      if (matches(pattern, t, x)) return activation_tree(name, std::move(x));
    }
  }
  return t;
}

}  // namespace

json activation_tree(const std::string& name, json x) {
  if (!activations().contains(name))
    throw Error(fmt::format("activation '{}' is not in data/{}; add an entry there to fuse it", name, kActivationsFile));
  const json& params = activations()[name].value("params", json::object());
  if (params.empty()) return json::array({name, std::move(x)});
  return json::array({name, std::move(x), params});
}

bool is_listed_pointwise(const ir::Node& node) { return node.kind == ir::NodeKind::Op && ops_table().contains(node.op); }

json pointwise_tree(const ir::Node& node, const OperandTree& operand) {
  if (!is_listed_pointwise(node)) throw NotPointwise("not a pointwise op of data/ir/pointwise_ops.json");
  const json& form = ops_table()[node.op];
  auto x = [&]() -> json {
    if (node.args.empty() || !ir::is_ref(node.args[0])) throw NotPointwise("its first argument is not a tensor");
    return operand(node.args[0]);
  };
  if (form.contains("activation")) return activation_node(form["activation"], x(), node, form.value("params", json::object()));
  if (form.contains("activation_by")) {
    const json& by = form["activation_by"];
    std::optional<json> v = argument(node, by.value("arg", json()), by.value("kwarg", ""));
    json key = v ? *v : by.value("default", json());
    const json& values = by.value("values", json::object());
    if (!key.is_string() || !values.contains(key.get<std::string>()))
      throw NotPointwise(fmt::format("its {} {} has no activation", by.value("kwarg", "argument"), key.dump()));
    return activation_node(values[key.get<std::string>()], x(), node, json::object());
  }
  if (form.contains("binary")) return folded_activation(binary_node(form, node, operand));
  if (form.contains("clamp")) return clamp_node(form["clamp"], node, x(), operand);
  if (form.contains("identity_if")) {
    const json& c = form["identity_if"];
    std::optional<json> v = argument(node, c.value("arg", json()), c.value("kwarg", ""));
    if (!v && c.contains("default")) v = c["default"];
    if (!v || *v != c["equals"])
      throw NotPointwise(fmt::format("its {} is {} (only {} is the identity)", c.value("kwarg", "argument"),
                                     v ? v->dump() : "not given", c["equals"].dump()));
    return x();
  }
  if (form.value("identity", false)) return x();
  if (form.contains("batch_norm")) return batch_norm_node(form["batch_norm"], node, x(), operand);
  // Epilogue trees have no bool values and no select; generated row-wise kernels take these.
  if (form.contains("compare") || form.contains("where") || form.contains("predicate"))
    throw NotPointwise("a comparison or select (generated row-wise kernels only)");
  throw Error(fmt::format("data/{}: {} has a form FACT does not read: {}", kOpsFile, node.op, form.dump()));
}

}  // namespace fact::discover
