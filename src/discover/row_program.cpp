#include "discover/row_program.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"

namespace fact::discover {
using nlohmann::json;

namespace {

const json& table(const char* file, const char* key) {
  static std::map<std::string, json> cache;
  auto it = cache.find(file);
  if (it == cache.end()) it = cache.emplace(file, read_json_file(data_dir() / file, file)).first;
  if (!it->second.contains(key) || !it->second[key].is_object())
    throw Error(fmt::format("{}: expected an object \"{}\"", file, key));
  return it->second.at(key);
}
const json& pointwise_ops() { return table("ir/pointwise_ops.json", "ops"); }
const json& row_reductions() { return table("ir/row_reductions.json", "ops"); }
const json& whole_tensor_reductions() { return table("ir/row_reductions.json", "whole_tensor"); }
const json& window_ops() { return table("ir/row_reductions.json", "windows"); }
const json& scan_ops() { return table("ir/row_reductions.json", "scans"); }
const json& reversal_ops() { return table("ir/row_reductions.json", "reversals"); }
const json& gather_ops() { return table("ir/row_reductions.json", "gathers"); }
const json& view_ops() { return table("ir/row_reductions.json", "views"); }
const json& pad_ops() { return table("ir/row_reductions.json", "pads"); }
const json& fill_ops() { return table("ir/row_reductions.json", "fills"); }
const json& activations() { return table("epilogues/activations.json", "activations"); }

bool is_ref(const json& a) { return a.is_object() && a.contains("ref"); }

// A float literal C++ and CUDA read exactly (9 significant digits round-trip a float).
std::string float_literal(double v) {
  if (std::isnan(v)) return "__int_as_float(0x7fffffff)";
  if (std::isinf(v)) return v > 0 ? "__int_as_float(0x7f800000)" : "(-__int_as_float(0x7f800000))";
  return fmt::format("{:.9e}f", v);
}

// A number literal of the IR: a plain number or bool, or a non-finite float as docs/ir-format.md encodes it
// ({"float": "nan"}); nullopt for anything else.
std::optional<double> number_value(const json& v) {
  if (v.is_number() || v.is_boolean()) return v.get<double>();
  if (v.is_object() && v.contains("float")) {
    const json& f = v["float"];
    return f.is_string() ? std::stod(f.get<std::string>()) : f.get<double>();
  }
  return std::nullopt;
}

// An argument by position, else kwarg, else absent (null).
json arg_at(const json& node, int index, const std::string& kwarg) {
  const json& args = node.at("args");
  if (index >= 0 && index < static_cast<int>(args.size())) return args[index];
  const json kw = node.value("kwargs", json::object());
  if (!kwarg.empty() && kw.contains(kwarg)) return kw[kwarg];
  return nullptr;
}

// {"arg": i, "kwarg": k, "default": v} or a bare index.
json read_spec(const json& node, const json& spec, const json& fallback = nullptr) {
  if (spec.is_number_integer()) return arg_at(node, spec.get<int>(), "");
  json v = arg_at(node, spec.value("arg", -1), spec.value("kwarg", ""));
  return v.is_null() ? spec.value("default", fallback) : v;
}

std::vector<int64_t> shape_of(const json& node) { return node.at("outputs").at(0).at("shape").get<std::vector<int64_t>>(); }

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::string cident(size_t i) { return fmt::format("v{}", i); }

struct Lowering {
  const json& fragment;
  RowProgram p;
  std::map<std::string, std::string> var;   // fragment value -> C var
  std::map<std::string, bool> per_row;      // C var -> per row
  std::vector<int64_t> full_shape;
  ReducedDims row_dims;                     // the dims folded into cols
  size_t next = 0;

  std::string fresh() { return cident(next++); }
  std::set<std::string> channel_inputs;     // fragment inputs read per channel
  std::map<std::string, int> window_inputs; // fragment inputs read through a pool's window -> input index
  std::map<std::string, std::vector<int64_t>> shape;  // fragment value -> its shape (inputs, then nodes as lowered)

  bool channel_input(const std::string& name) const { return channel_inputs.count(name) > 0; }
  std::map<std::string, int> input_index;   // fragment input -> its index
  std::set<std::string> read_as_is;         // inputs some node reads unflipped

  std::string add(RowStatement s) {
    per_row[s.var] = s.per_row;
    if (s.kind == RowStatement::Kind::reduce && s.reduce == "maxsumexp") {
      per_row[s.var + "_m"] = per_row[s.var + "_s"] = true;
    }
    if (s.kind == RowStatement::Kind::reduce && s.reduce == "meanvar") {
      per_row[s.var + "_m"] = per_row[s.var + "_v"] = true;
    }
    p.statements.push_back(s);
    return s.var;
  }
  std::string expr(const std::string& e, bool row) {
    RowStatement s;
    s.var = fresh();
    s.expr = e;
    s.per_row = row;
    return add(s);
  }
  std::string reduce(const std::string& op, const std::string& operand) {
    RowStatement s;
    s.kind = RowStatement::Kind::reduce;
    s.var = fresh();
    s.reduce = op;
    s.operand = operand;
    s.per_row = true;
    return add(s);
  }

  // a / b; by_row: b is one value per row (a var) dividing per-element values, so its reciprocal is taken once a row.
  std::string divide(const std::string& a, const std::string& b, bool by_row) {
    if (!by_row) return fmt::format("({} / {})", a, b);
    const std::string s = expr(fmt::format("fact_act::divisor_scale({})", b), true);
    const std::string scaled = expr(fmt::format("({} * {})", b, s), true);
    const std::string r = expr(fmt::format("fact_act::row_reciprocal({})", scaled), true);
    return fmt::format("fact_act::div_by_reciprocal({}, {}, {}, {})", a, scaled, r, s);
  }

  // The C expression of an operand (a value of the fragment or a number).
  std::string operand(const std::string& node, const json& a, bool* row = nullptr) {
    if (is_ref(a)) {
      const std::string& r = a["ref"].get_ref<const std::string&>();
      auto it = var.find(r);
      if (it == var.end()) throw Error(fmt::format("node '{}' reads '{}', which is neither inside the fragment nor an input", node, r));
      if (window_inputs.count(r))
        throw Error(fmt::format("node '{}' reads '{}', an input only a pool reads (its shape is not the fragment's)", node, r));
      if (auto in = input_index.find(r); in != input_index.end()) {
        if (p.index[in->second])
          throw Error(fmt::format("node '{}' reads '{}', an int64 input, as a value; a generated kernel reads one only as a "
                                  "gather's index", node, r));
        if (p.reversed[in->second])
          throw Error(fmt::format("node '{}' reads '{}', which another node flips; an input is read one way", node, r));
        read_as_is.insert(r);
      }
      if (row) *row = per_row.at(it->second);
      return it->second;
    }
    if (row) *row = true;
    if (const auto v = number_value(a)) return float_literal(*v);
    throw Error(fmt::format("node '{}': argument {} is not a tensor or a number", node, a.dump()));
  }

  std::string activation(const std::string& node_name, const json& node, const std::string& name, const json& params,
                         const std::string& x) {
    if (!activations().contains(name)) throw Error(fmt::format("node '{}': activation '{}' is not in data/epilogues/activations.json", node_name, name));
    const json& a = activations()[name];
    std::string names = "const float x", values = x;
    const json table_params = a.value("params", json::object());
    for (const auto& [param, dflt] : table_params.items()) {
      json v = params.contains(param) ? arg_at(node, params[param].get<int>(), param) : json(nullptr);
      if (v.is_null()) v = dflt;
      names += ", const float " + param;
      values += ", " + operand(node_name, v);
    }
    // A lambda keeps the table's names (x and the params) local to this one expression; it captures nothing
    // (nvcc 13.0's front end crashed on a [&] lambda in a strided-row kernel, "i_copy_expr_tree").
    return fmt::format("[]({}) {{ return {}; }}({})", names, a.at("expr").get<std::string>(), values);
  }

  void pointwise(const json& node, const json& form) {
    const std::string name = node.at("name");
    bool row = true;
    auto opnd = [&](int i) {
      bool r = true;
      std::string e = operand(name, arg_at(node, i, ""), &r);
      row = row && r;
      return e;
    };
    std::string e;
    if (form.contains("activation")) {
      std::string x = opnd(0);
      e = activation(name, node, form["activation"], form.value("params", json::object()), x);
    } else if (form.contains("activation_by")) {
      const json& by = form["activation_by"];
      json v = read_spec(node, by);
      std::string key = v.is_string() ? v.get<std::string>() : v.dump();
      if (!by.at("values").contains(key)) throw Error(fmt::format("node '{}': {} = {} has no activation", name, by.value("kwarg", ""), key));
      std::string x = opnd(0);
      e = activation(name, node, by["values"][key], json::object(), x);
    } else if (form.contains("binary")) {
      bool a_row = true, b_row = true;
      std::string a = operand(name, arg_at(node, 0, ""), &a_row), b = operand(name, arg_at(node, 1, ""), &b_row);
      row = a_row && b_row;
      if (form.contains("scale")) {
        json s = read_spec(node, form["scale"], 1);
        if (!(s.is_number() && s.get<double>() == 1.0)) b = fmt::format("({} * {})", operand(name, s), b);
      }
      if (form.value("swap", false)) {
        std::swap(a, b);
        std::swap(a_row, b_row);
      }
      static const std::map<std::string, std::string> fmts = {{"add", "({} + {})"}, {"sub", "({} - {})"}, {"mul", "({} * {})"},
                                                              {"div", "({} / {})"}, {"max", "fmaxf({}, {})"}, {"min", "fminf({}, {})"}};
      const std::string op = form["binary"].get<std::string>();
      e = op == "div" ? divide(a, b, !a_row && b_row && per_row.count(b)) : fmt::format(fmt::runtime(fmts.at(op)), a, b);
    } else if (form.contains("clamp")) {
      e = opnd(0);
      const json& c = form["clamp"];
      if (c.contains("min")) if (json lo = arg_at(node, c["min"].get<int>(), "min"); !lo.is_null()) {
        bool r = true;
        e = fmt::format("fmaxf({}, {})", e, operand(name, lo, &r));
        row = row && r;
      }
      if (c.contains("max")) if (json hi = arg_at(node, c["max"].get<int>(), "max"); !hi.is_null()) {
        bool r = true;
        e = fmt::format("fminf({}, {})", e, operand(name, hi, &r));
        row = row && r;
      }
    } else if (form.contains("compare")) {
      // A bool is held as 1 or 0 (a select tests it against 0); NaN compares false except under ne, as in C++.
      static const std::map<std::string, std::string> ops = {{"lt", "<"}, {"le", "<="}, {"gt", ">"},
                                                             {"ge", ">="}, {"eq", "=="}, {"ne", "!="}};
      std::string a = opnd(0), b = opnd(1);
      e = fmt::format("({} {} {} ? 1.0f : 0.0f)", a, ops.at(form["compare"].get<std::string>()), b);
    } else if (form.contains("where")) {
      std::string c = opnd(0), a = opnd(1), b = opnd(2);
      e = fmt::format("({} != 0.0f ? {} : {})", c, a, b);
    } else if (form.contains("predicate")) {
      if (form["predicate"] != "isnan") throw Error(fmt::format("node '{}': predicate {} has no lowering", name, form["predicate"].dump()));
      e = fmt::format("(isnan({}) ? 1.0f : 0.0f)", opnd(0));
    } else if (form.contains("identity_if")) {
      const json& c = form["identity_if"];
      if (read_spec(node, c) != c.at("equals")) throw Error(fmt::format("node '{}' ({}) is not pointwise here (training mode)", name, node.at("op").get<std::string>()));
      e = opnd(0);
    } else if (form.value("identity", false)) {
      e = opnd(0);
    } else if (form.contains("batch_norm")) {
      e = batch_norm(node, form["batch_norm"], opnd(0));
    } else {
      throw Error(fmt::format("node '{}' ({}) reads over dim 1, not along rows; it stays PyTorch's", name, node.at("op").get<std::string>()));
    }
    bool node_row = is_per_row(node);
    if (!node_row && row) e = e;  // a per-row expression used per element is still one value per row
    var[name] = expr(e, node_row);
  }

  // BatchNorm in eval: (x - running_mean) * rsqrt(running_var + eps) * weight + bias, each vector one value per channel
  // (dim 1): a channel input of the fragment, or over [N, C] the row shared by every row.
  std::string batch_norm(const json& node, const json& bn, const std::string& x) {
    const std::string name = node.at("name");
    if (read_spec(node, bn.at("training")) != json(false))
      throw Error(fmt::format("node '{}' is a BatchNorm in training mode (batch statistics: a reduction over the other "
                              "dims); not generated", name));
    const bool two_dims = full_shape.size() == 2 && row_dims.first == 1;
    auto vec = [&](const char* key) -> std::string {
      json t = arg_at(node, bn.at(key).get<int>(), key);
      if (t.is_null()) return "";
      const std::string ref = is_ref(t) ? t["ref"].get<std::string>() : "";
      auto in = input_index.find(ref);
      const bool ok = in != input_index.end() && (channel_input(ref) || (two_dims && p.inputs[in->second] == RowInputKind::row_broadcast));
      if (!ok) throw Error(fmt::format("node '{}': its {} is not a per-channel input of the fragment", name, key));
      return operand(name, t);
    };
    const std::string mean = vec("running_mean"), var = vec("running_var");
    if (mean.empty() || var.empty()) throw Error(fmt::format("node '{}': a BatchNorm without running statistics", name));
    json eps = read_spec(node, bn.at("eps"));
    if (eps.is_null()) eps = 1e-5;
    std::string y = fmt::format("({} - {}) * rsqrtf({} + {})", x, mean, var, operand(name, eps));
    if (std::string w = vec("weight"); !w.empty()) y = fmt::format("({}) * {}", y, w);
    if (std::string b = vec("bias"); !b.empty()) y = fmt::format("({}) + {}", y, b);
    return y;
  }

  // A pool of a window input: its value at element f of the full tensor is what that input's load holds.
  void window(const json& node, const json& form) {
    const std::string name = node.at("name");
    const json x = arg_at(node, 0, "self");
    const std::string src = is_ref(x) ? x["ref"].get<std::string>() : "";
    auto it = window_inputs.find(src);
    if (it == window_inputs.end())
      throw Error(fmt::format("node '{}' ({}) pools '{}', which is not an input of the fragment marked window; a "
                              "generated kernel pools a tensor in memory", name, node.at("op").get<std::string>(), x.dump()));
    WindowRead& w = p.window[it->second];
    if (!w.form.empty()) throw Error(fmt::format("node '{}' pools '{}', which another pool of the fragment reads too", name, src));
    const int spatial = form.at("spatial");
    const std::vector<int64_t>& in = shape.at(src);
    const std::vector<int64_t> out = shape_of(node);
    const int rank = static_cast<int>(out.size());
    if (out != full_shape || static_cast<int>(in.size()) != rank || rank <= spatial ||
        !std::equal(in.begin(), in.end() - spatial, out.begin()))
      throw Error(fmt::format("node '{}' pools [{}] into [{}]; a generated kernel's pool makes its full tensor [{}], "
                              "the dims before the pooled ones kept", name, fmt::join(in, ","), fmt::join(out, ","),
                              fmt::join(full_shape, ",")));
    // An int list of `spatial` values, or one for all (PyTorch's int[2] takes `2` or `[2]`).
    auto ints = [&](const char* key, const std::vector<int64_t>& fallback) {
      json v = read_spec(node, form.at(key));
      if (v.is_number_integer()) v = json::array({v});
      if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_number_integer(); }))
        throw Error(fmt::format("node '{}': {} {} is not a list of integers", name, key, v.dump()));
      std::vector<int64_t> r = v.get<std::vector<int64_t>>();
      if (r.empty()) r = fallback;
      if (r.size() == 1) r.assign(spatial, r[0]);
      if (static_cast<int>(r.size()) != spatial)
        throw Error(fmt::format("node '{}': {} {} does not have {} values", name, key, v.dump(), spatial));
      return r;
    };
    w.form = form.at("form");
    w.in.assign(in.end() - spatial, in.end());
    w.out.assign(out.end() - spatial, out.end());
    w.kernel = ints("kernel", {});
    w.stride = ints("stride", w.kernel);
    w.padding = ints("padding", {0});
    w.dilation = form.contains("dilation") ? ints("dilation", {1}) : std::vector<int64_t>(spatial, 1);
    for (int d = 0; d < spatial; ++d)
      if (w.kernel[d] < 1 || w.stride[d] < 1 || w.padding[d] < 0 || w.dilation[d] < 1 || w.padding[d] * 2 > w.kernel[d])
        throw Error(fmt::format("node '{}': window {} stride {} padding {} dilation {} is not a valid pool", name,
                                fmt::join(w.kernel, "x"), fmt::join(w.stride, "x"), fmt::join(w.padding, "x"),
                                fmt::join(w.dilation, "x")));
    if (form.contains("count_include_pad")) w.count_include_pad = read_spec(node, form["count_include_pad"]).get<bool>();
    if (form.contains("divisor_override")) {
      json d = read_spec(node, form["divisor_override"]);
      if (!d.is_null() && (!d.is_number_integer() || d.get<int64_t>() == 0))
        throw Error(fmt::format("node '{}': divisor_override {} is not a nonzero integer", name, d.dump()));
      if (!d.is_null()) w.divisor = d.get<int64_t>();
    }
    var[name] = p.statements[it->second].var;  // inputs' loads are the first statements, in input order
  }

  bool is_per_row(const std::vector<int64_t>& s) const { return numel(s) == p.rows && numel(s) != p.rows * p.cols; }
  bool is_per_row(const json& node) const { return is_per_row(shape_of(node)); }
  // The recorded shape of a node's operand 0 (its self), or null where that is no value of the fragment.
  const std::vector<int64_t>* operand_shape(const json& node) const {
    const json x = arg_at(node, 0, "self");
    const auto known = is_ref(x) ? shape.find(x["ref"].get<std::string>()) : shape.end();
    return known != shape.end() ? &known->second : nullptr;
  }

  // Operand 0 of a node that walks the rows (a reduction, a scan, a gather): one value per element, walked along the
  // fragment's rows (the dims the node's op names: row_reduction_dims).
  std::string along_rows(const json& node, const char* verb) {
    const std::string name = node.at("name");
    bool row = false;
    std::string x = operand(name, arg_at(node, 0, "self"), &row);
    if (row) throw Error(fmt::format("node '{}' {} a value that is one per row", name, verb));
    // Its dims are its operand's: a view of the full tensor without or with more dims of extent 1.
    const std::vector<int64_t>* in = operand_shape(node);
    ReducedDims k = row_reduction_dims_of(name, node.at("op"), node.at("args"), node.value("kwargs", json::object()),
                                          in ? *in : full_shape, full_shape);
    if (!(k == row_dims))
      throw Error(fmt::format("node '{}' {} dims {}..{}; the fragment's rows are dims {}..{}", name, verb, k.first,
                              k.first + k.count - 1, row_dims.first, row_dims.first + row_dims.count - 1));
    return x;
  }

  // A sum, mean, max, min or logsumexp of a value that is one per row, over its dims of extent 1 (level2/18's max,
  // mean and logsumexps of a row's sum, 51's logsumexp of a mean): each reduces one element, so it is that value
  // (PyTorch's logsumexp of one element is the element too, infinite or NaN).
  bool reduces_one_element(const json& node, const std::string& f) const {
    if (f != "sum" && f != "mean" && f != "max" && f != "min" && f != "logsumexp") return false;
    const std::vector<int64_t>* known = operand_shape(node);
    if (!known || !is_per_row(*known)) return false;  // an unknown name: operand() says so
    const std::vector<int64_t>& in = *known;
    const ReducedDims k = row_reduction_dims(node.at("name"), node.at("op"), node.at("args"),
                                             node.value("kwargs", json::object()), static_cast<int>(in.size()));
    for (int d = k.first; d < k.first + k.count; ++d)
      if (in[d] != 1) return false;
    return k.count > 0;
  }

  void reduction(const json& node, const json& form) {
    const std::string name = node.at("name");
    const std::string f = form.at("form");
    if (reduces_one_element(node, f)) {
      var[name] = operand(name, arg_at(node, 0, "self"));
      return;
    }
    if (p.scan()) throw Error(fmt::format("node '{}' reduces a row that a scan also walks; not generated", name));
    std::string x = along_rows(node, "reduces");
    const std::string cols = float_literal(static_cast<double>(p.cols));
    if (f == "sum") var[name] = reduce("sum", x);
    else if (f == "mean") var[name] = expr(fmt::format("{} / {}", reduce("sum", x), cols), true);
    else if (f == "max" || f == "min") var[name] = reduce(f, x);
    else if (f == "norm") {
      // linalg_vector_norm: ord 2 is the root of the sum of squares, ord 1 the sum of magnitudes.
      json ord = read_spec(node, form.at("ord"));
      double o = ord.is_number() ? ord.get<double>() : -1;
      if (o == 2) var[name] = expr(fmt::format("sqrtf({})", reduce("sum", expr(fmt::format("{0} * {0}", x), false))), true);
      else if (o == 1) var[name] = reduce("sum", expr(fmt::format("fabsf({})", x), false));
      else throw Error(fmt::format("node '{}': a vector norm of ord {} is not generated (ord 1 and 2 are)", name, ord.dump()));
    }
    else if (f == "logsumexp" || f == "softmax" || f == "log_softmax") {
      std::string r = reduce("maxsumexp", x);
      // An all -inf row has max -inf: exp(x - max) would be NaN; PyTorch gives -inf (logsumexp) or NaN (softmax).
      if (f == "logsumexp") var[name] = expr(fmt::format("{0}_m + logf({0}_s)", r), true);
      else if (f == "softmax") var[name] = expr(divide(fmt::format("expf({} - {}_m)", x, r), r + "_s", true), false);
      else var[name] = expr(fmt::format("{1} - {0}_m - logf({0}_s)", r, x), false);
    } else if (f == "layer_norm" || f == "instance_norm" || f == "group_norm") {
      // Running statistics make an instance norm pointwise, with other inputs: not generated.
      if (f == "instance_norm" && read_spec(node, form.at("use_input_stats")) != json(true))
        throw Error(fmt::format("node '{}': instance_norm with running statistics is not generated", name));
      // Mean and variance in one sweep (Welford): a row too long for registers is read twice, not three times.
      std::string mv = reduce("meanvar", x);
      json eps = read_spec(node, form.at("eps"));
      std::string rstd = expr(fmt::format("rsqrtf({}_v + {})", mv, operand(name, eps)), true);
      std::string y = fmt::format("({} - {}_m) * {}", x, mv, rstd);
      for (const char* key : {"weight", "bias"}) {
        json t = arg_at(node, form.at(key).get<int>(), key);
        if (t.is_null()) continue;
        // Instance and group norms weigh each channel: their weight and bias are channel inputs.
        if (f != "layer_norm" && !(is_ref(t) && channel_input(t["ref"])))
          throw Error(fmt::format("node '{}': its {} is not a per-channel input of the fragment", name, key));
        y = fmt::format(fmt::runtime(std::string(key) == "weight" ? "({}) * {}" : "({}) + {}"), y, operand(name, t));
      }
      var[name] = expr(y, false);
    } else {
      throw Error(fmt::format("node '{}': data/ir/row_reductions.json form '{}' has no lowering", name, f));
    }
  }

  // An inclusive prefix along contiguous rows (the kernel walks a row's tiles in order, carrying the prefix).
  void scan(const json& node, const json& form) {
    const std::string name = node.at("name");
    const std::string f = form.at("form");
    if (f != "sum" && f != "prod") throw Error(fmt::format("node '{}': scan form '{}' has no lowering", name, f));
    if (!read_spec(node, form.at("dtype")).is_null())
      throw Error(fmt::format("node '{}' ({}) converts to another dtype; a generated scan keeps the fragment's",
                              name, node.at("op").get<std::string>()));
    std::string x = along_rows(node, "scans");
    if (p.inner > 1)
      throw Error(fmt::format("node '{}' scans dim {}, which has dims behind it; a generated scan walks contiguous rows",
                              name, row_dims.first));
    if (p.scan()) throw Error(fmt::format("node '{}' is a second scan; a generated kernel holds one", name));
    if (p.reductions() > 0) throw Error(fmt::format("node '{}' scans a row that a reduction also reads; not generated", name));
    RowStatement s;
    s.kind = RowStatement::Kind::scan;
    s.var = fresh();
    s.reduce = f;
    s.operand = x;
    var[name] = add(s);
  }

  // A gather along the row's one dim by a per-row int64 index input ([rows, 1]): the element at column index[row] of a
  // value the kernel computes, one per row (the kernel keeps it where the sweep passes that column).
  void gather(const json& node, const json& form) {
    const std::string name = node.at("name");
    std::string x = along_rows(node, "picks from");  // one dim, the gather's
    const json idx = arg_at(node, form.at("index").get<int>(), "index");
    const std::string src = is_ref(idx) ? idx["ref"].get<std::string>() : "";
    auto in = input_index.find(src);
    if (in == input_index.end() || !p.index[in->second])
      throw Error(fmt::format("node '{}' gathers by {}, which is not an int64 per-row input of the fragment (one index a "
                              "row)", name, idx.dump()));
    if (!is_per_row(node)) throw Error(fmt::format("node '{}' gathers more than one element a row", name));
    RowStatement s;
    s.kind = RowStatement::Kind::reduce;
    s.var = fresh();
    s.reduce = "pick";
    s.operand = x;
    s.input = in->second;
    s.per_row = true;
    var[name] = add(s);
  }

  // A view adding or dropping dims of size 1: the same value, one per row ([rows, 1] <-> [rows]) or full (a squeeze of
  // a pool's [rows, 1, cols]).
  void view(const json& node) {
    const std::string name = node.at("name");
    bool row = false;
    std::string x = operand(name, arg_at(node, 0, "self"), &row);
    const bool full = !row && same_but_unit_dims(shape_of(node), full_shape);
    if (!full && (!row || !is_per_row(node)))
      throw Error(fmt::format("node '{}' ({}) views a value as neither one per row nor the full tensor's elements; a "
                              "generated kernel keeps its values' shapes", name, node.at("op").get<std::string>()));
    var[name] = x;
  }

  // A flip of the row's one dim: of an input only flips read (loaded from the row's end) or of the fragment's output
  // (stored from the row's end). Every value between keeps the graph's index, the scan's order.
  void reversal(const json& node, const json& form, const std::string& output) {
    const std::string name = node.at("name");
    json dims = read_spec(node, form.at("dims"));
    if (dims.is_number_integer()) dims = json::array({dims});
    const int rank = static_cast<int>(full_shape.size());
    const bool row_dim = dims.is_array() && dims.size() == 1 && dims[0].is_number_integer() &&
                         (dims[0].get<int64_t>() + rank) % rank == rank - 1;
    if (!row_dim || row_dims.count != 1 || row_dims.first != rank - 1)
      throw Error(fmt::format("node '{}' flips dims {}; a generated kernel reverses only its rows' one dim, the last", name,
                              dims.dump()));
    const json x = arg_at(node, 0, "self");
    const std::string src = is_ref(x) ? x["ref"].get<std::string>() : "";
    if (auto in = input_index.find(src); in != input_index.end()) {
      if (read_as_is.count(src))
        throw Error(fmt::format("node '{}' flips '{}', which another node reads unflipped; an input is read one way", name, src));
      if (p.inputs[in->second] != RowInputKind::full)
        throw Error(fmt::format("node '{}' flips '{}', which is not a full input of the fragment", name, src));
      p.reversed[in->second] = true;
      var[name] = var.at(src);
      return;
    }
    if (name != output)
      throw Error(fmt::format("node '{}' flips a value made in the fragment; a generated kernel flips its inputs and its "
                              "output only", name));
    bool row = false;
    var[name] = operand(name, x, &row);
    if (row) throw Error(fmt::format("node '{}' flips a value that is one per row", name));
    p.output_reversed = true;
  }

  // Constant columns before and after each row of the fragment's output (a constant_pad_nd of the last dim, as the
  // generated pass writes a cat of fills around it): the kernel writes them with the row.
  void pad(const json& node, const json& form, const std::string& output) {
    const std::string name = node.at("name");
    if (name != output)
      throw Error(fmt::format("node '{}' pads a value made in the fragment; a generated kernel pads its output's rows only", name));
    const json pads = read_spec(node, form.at("pad"));
    const int rank = static_cast<int>(full_shape.size());
    const bool two = pads.is_array() && pads.size() == 2 && pads[0].is_number_integer() && pads[1].is_number_integer();
    if (!two || pads[0].get<int64_t>() < 0 || pads[1].get<int64_t>() < 0)
      throw Error(fmt::format("node '{}' pads by {}; a generated kernel pads the last dim alone, by counts of 0 or more",
                              name, pads.dump()));
    if (row_dims.count != 1 || row_dims.first != rank - 1)
      throw Error(fmt::format("node '{}' pads the last dim, which is not the fragment's rows (dims {}..{})", name,
                              row_dims.first, row_dims.first + row_dims.count - 1));
    const json spec = read_spec(node, form.at("value"), 0);
    const std::optional<double> value = number_value(spec);
    if (!value) throw Error(fmt::format("node '{}' pads with {}, not a number", name, spec.dump()));
    bool row = false;
    var[name] = operand(name, arg_at(node, 0, "self"), &row);
    if (row) throw Error(fmt::format("node '{}' pads a value that is one per row", name));
    p.pad_lo = pads[0].get<int64_t>();
    p.pad_hi = pads[1].get<int64_t>();
    p.pad_value = float_literal(*value);
  }
};

}  // namespace

const RowStatement* RowProgram::scan() const {
  auto it = std::find_if(statements.begin(), statements.end(),
                         [](const RowStatement& s) { return s.kind == RowStatement::Kind::scan; });
  return it == statements.end() ? nullptr : &*it;
}

int RowProgram::reductions() const {
  return static_cast<int>(std::count_if(statements.begin(), statements.end(),
                                        [](const RowStatement& s) { return s.kind == RowStatement::Kind::reduce; }));
}

bool RowProgram::computes_nothing() const {
  auto is_name = [](const std::string& e) {
    return !e.empty() && std::all_of(e.begin(), e.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  };
  if (std::any_of(inputs.begin(), inputs.end(), [](RowInputKind k) { return k == RowInputKind::window; })) return false;
  return std::all_of(statements.begin(), statements.end(), [&](const RowStatement& s) {
    return s.kind == RowStatement::Kind::load || (s.kind == RowStatement::Kind::expr && is_name(s.expr));
  });
}

bool yields_bool(const std::string& op) {
  if (!pointwise_ops().contains(op)) return false;
  const json& form = pointwise_ops()[op];
  return form.contains("compare") || form.contains("predicate");
}

bool row_reduction_weight_arg(const std::string& op, int index) {
  if (!row_reductions().contains(op)) return false;
  const json& form = row_reductions()[op];
  const std::string f = form.at("form");
  if (f != "instance_norm" && f != "group_norm") return false;
  return form.at("weight").get<int>() == index || form.at("bias").get<int>() == index;
}

bool channel_vector_arg(const std::string& op, int index) {
  if (row_reduction_weight_arg(op, index)) return true;
  if (!pointwise_ops().contains(op) || !pointwise_ops()[op].contains("batch_norm")) return false;
  const json& bn = pointwise_ops()[op]["batch_norm"];
  for (const char* key : {"weight", "bias", "running_mean", "running_var"})
    if (bn.at(key).get<int>() == index) return true;
  return false;
}

bool row_program_reads(const std::string& op) {
  return pointwise_ops().contains(op) || row_reductions().contains(op) || scan_ops().contains(op) ||
         reversal_ops().contains(op) || window_ops().contains(op) || gather_ops().contains(op) || view_ops().contains(op);
}

bool is_gather_op(const std::string& op) { return gather_ops().contains(op); }

bool is_identity_op(const std::string& op) {
  return pointwise_ops().contains(op) && pointwise_ops()[op].value("identity", false);
}

bool is_row_view_op(const std::string& op) { return view_ops().contains(op); }

bool is_window_op(const std::string& op) { return window_ops().contains(op); }

bool is_reversal_op(const std::string& op) { return reversal_ops().contains(op); }

const json* pad_form(const std::string& op) { return pad_ops().contains(op) ? &pad_ops()[op] : nullptr; }

json op_argument(const json& args, const json& kwargs, const json& spec) {
  return read_spec({{"args", args}, {"kwargs", kwargs}}, spec);
}

std::optional<double> fill_constant(const std::string& op, const json& args, const json& kwargs) {
  if (!fill_ops().contains(op)) return std::nullopt;
  const json& form = fill_ops()[op];
  return number_value(form.contains("constant") ? form["constant"] : op_argument(args, kwargs, form.at("value")));
}

std::string row_reduction_form(const std::string& op) {
  return row_reductions().contains(op) ? row_reductions()[op].value("form", "") : "";
}

std::string row_partials_of(const std::string& op) {
  const json& whole = whole_tensor_reductions();
  return whole.contains(op) ? whole[op].get<std::string>() : "";
}

ReducedDims row_reduction_dims(const std::string& node, const std::string& op, const json& args, const json& kwargs,
                               int rank) {
  const json& form = row_reductions().contains(op) ? row_reductions()[op] : scan_ops().contains(op) ? scan_ops()[op]
                     : gather_ops().contains(op) ? gather_ops()[op] : json::object();
  if (form.empty()) return {};
  json n = {{"name", node}, {"args", args}, {"kwargs", kwargs}};
  std::vector<int64_t> dims;
  if (form.contains("dims")) {
    json d = read_spec(n, form["dims"]);
    if (d.is_null() || (d.is_array() && d.empty())) {
      for (int i = 0; i < rank; ++i) dims.push_back(i);
    } else if (d.is_array()) {
      dims = d.get<std::vector<int64_t>>();
    } else {
      dims = {d.get<int64_t>()};
    }
  } else if (form.contains("dim")) {
    dims = {read_spec(n, form["dim"]).get<int64_t>()};
  } else if (form.contains("normalized_shape")) {
    int64_t k = static_cast<int64_t>(read_spec(n, form["normalized_shape"]).size());
    for (int64_t i = rank - k; i < rank; ++i) dims.push_back(i);
  } else if (form.contains("from_dim")) {
    for (int64_t i = form["from_dim"].get<int64_t>(); i < rank; ++i) dims.push_back(i);
  }
  std::set<int64_t> s;
  for (auto d : dims) s.insert(d < 0 ? d + rank : d);
  int k = static_cast<int>(s.size());
  if (k == 0 || *s.begin() < 0 || *s.rbegin() >= rank || *s.rbegin() - *s.begin() + 1 != k)
    throw Error(fmt::format("node '{}' ({}) reduces dims [{}] of a rank-{} tensor, which are not adjacent; a row-wise "
                            "kernel reduces one run of dims", node, op, fmt::join(dims, ","), rank));
  if (k == rank && rank > 1)
    throw Error(fmt::format("node '{}' ({}) reduces the whole tensor to one value; a row-wise kernel needs rows", node, op));
  int64_t groups = 1;
  if (form.contains("groups")) {
    json g = read_spec(n, form["groups"]);
    if (!g.is_number_integer() || g.get<int64_t>() < 1)
      throw Error(fmt::format("node '{}' ({}): groups {} is not a positive integer", node, op, g.dump()));
    groups = g.get<int64_t>();
  }
  return {static_cast<int>(*s.begin()), k, groups};
}

namespace {
// The positions of a shape's dims other than 1.
std::vector<int> non_unit_dims(const std::vector<int64_t>& s) {
  std::vector<int> out;
  for (int d = 0; d < static_cast<int>(s.size()); ++d)
    if (s[d] != 1) out.push_back(d);
  return out;
}
}  // namespace

bool same_but_unit_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const std::vector<int> da = non_unit_dims(a), db = non_unit_dims(b);
  if (da.size() != db.size()) return false;
  for (size_t i = 0; i < da.size(); ++i)
    if (a[da[i]] != b[db[i]]) return false;
  return true;
}

std::optional<ReducedDims> reduced_dims_in(const std::vector<int64_t>& in, const ReducedDims& k, const std::vector<int64_t>& full) {
  if (in == full) return k;
  if (!same_but_unit_dims(in, full)) return std::nullopt;
  const std::vector<int> di = non_unit_dims(in), df = non_unit_dims(full);
  int first = -1, last = -1;
  for (size_t i = 0; i < di.size(); ++i)
    if (di[i] >= k.first && di[i] < k.first + k.count) {
      if (first < 0) first = df[i];
      last = df[i];
    }
  if (first < 0) return std::nullopt;
  return ReducedDims{first, last - first + 1, k.groups};
}

ReducedDims row_reduction_dims_of(const std::string& node, const std::string& op, const json& args, const json& kwargs,
                                  const std::vector<int64_t>& in, const std::vector<int64_t>& full) {
  if (!same_but_unit_dims(in, full)) return row_reduction_dims(node, op, args, kwargs, static_cast<int>(full.size()));
  const ReducedDims k = row_reduction_dims(node, op, args, kwargs, static_cast<int>(in.size()));
  if (k.count == 0) return k;
  const auto mapped = reduced_dims_in(in, k, full);
  if (!mapped) throw Error(fmt::format("node '{}' reduces only dims of extent 1 of [{}]; not generated", node, fmt::join(in, ",")));
  return *mapped;
}

bool broadcasts_per_row(const std::vector<int64_t>& a, const std::vector<int64_t>& o, const std::vector<int64_t>& full,
                        const ReducedDims& rows) {
  const int rank = static_cast<int>(o.size()), pad = rank - static_cast<int>(a.size());
  if (pad < 0 || !same_but_unit_dims(o, full)) return false;
  const std::vector<int> df = non_unit_dims(full);
  for (int d = 0, i = 0; d < rank; ++d) {
    const int64_t v = d < pad ? 1 : a[d - pad];
    if (o[d] == 1) {
      if (v != 1) return false;
      continue;
    }
    const int j = df[i++];  // o's d-th dim is full's j-th
    const bool row_dim = j >= rows.first && j < rows.first + rows.count;
    if (v != (row_dim ? 1 : o[d])) return false;
  }
  return true;
}

RowProgram lower_row_program(const json& fragment) {
  if (!fragment.is_object() || fragment.value("format", "") != "fact-rowwise-fragment")
    throw Error("not a fact-rowwise-fragment object");
  Lowering L{fragment, {}, {}, {}, {}, {}, 0};
  RowProgram& p = L.p;
  p.rows = fragment.at("rows");
  p.cols = fragment.at("cols");
  p.dtype = fragment.at("dtype");
  L.full_shape = fragment.value("full_shape", std::vector<int64_t>{p.rows, p.cols});
  const int rank = static_cast<int>(L.full_shape.size());
  const int trailing = fragment.value("trailing_dims", 1), inner_dims = fragment.value("inner_dims", 0);
  if (trailing < 1 || inner_dims < 0 || trailing + inner_dims > std::max(rank, 1))
    throw Error(fmt::format("fragment: trailing_dims {} and inner_dims {} do not fit its rank-{} tensors", trailing,
                            inner_dims, rank));
  const int64_t groups = fragment.value("groups", int64_t{1});
  L.row_dims = {rank - inner_dims - trailing, trailing, groups};
  for (int d = rank - inner_dims; d < rank; ++d) p.inner *= L.full_shape[d];
  if (inner_dims > 0 && fragment.value("inner", int64_t{0}) != p.inner)
    throw Error(fmt::format("fragment: inner {} is not the product of its last {} dims ({})",
                            fragment.value("inner", int64_t{0}), inner_dims, p.inner));
  int i = 0;
  for (const auto& in : fragment.at("inputs")) {
    RowStatement s;
    s.kind = RowStatement::Kind::load;
    s.var = L.fresh();
    s.input = i++;
    ChannelIndex ch;
    if (in.contains("channel")) {
      ch = {in["channel"].at("channels").get<int64_t>(), in["channel"].at("inner").get<int64_t>()};
      if (ch.channels < 1 || ch.inner < 1) throw Error(fmt::format("fragment input '{}': bad channel {}", in.at("name").get<std::string>(), in["channel"].dump()));
      if (p.inner > 1) throw Error(fmt::format("fragment input '{}': a per-channel input of strided rows is not generated", in.at("name").get<std::string>()));
      L.channel_inputs.insert(in.at("name").get<std::string>());
    }
    const bool window = in.value("window", false);
    if (window && ch.channels) throw Error(fmt::format("fragment input '{}': both a channel and a window input", in.at("name").get<std::string>()));
    if (window) L.window_inputs[in.at("name").get<std::string>()] = i - 1;
    L.shape[in.at("name").get<std::string>()] = in.value("shape", std::vector<int64_t>{});
    const bool per_row = in.value("per_row", false);
    if (per_row && (window || ch.channels))
      throw Error(fmt::format("fragment input '{}': a per-row input is neither a channel nor a window input", in.at("name").get<std::string>()));
    s.per_row = per_row;  // loaded once at the row's start
    p.inputs.push_back(window ? RowInputKind::window : ch.channels ? RowInputKind::channel : per_row ? RowInputKind::per_row
                       : in.value("broadcast", false) ? RowInputKind::row_broadcast : RowInputKind::full);
    p.channel.push_back(ch);
    p.window.emplace_back();
    p.reversed.push_back(false);
    const bool boolean = in.value("dtype", p.dtype) == "bool";
    if (boolean && window) throw Error(fmt::format("fragment input '{}': a pool of a bool tensor is not generated", in.at("name").get<std::string>()));
    p.boolean.push_back(boolean);
    const bool index = in.value("dtype", p.dtype) == "int64";
    if (index && !per_row)
      throw Error(fmt::format("fragment input '{}': an int64 input is a gather's index, one value per row", in.at("name").get<std::string>()));
    p.index.push_back(index);
    L.input_index[in.at("name").get<std::string>()] = i - 1;
    L.var[in.at("name").get<std::string>()] = L.add(s);
  }
  for (const auto& node : fragment.at("nodes")) {
    const std::string op = node.at("op");
    p.ops.push_back(op);
    const std::string name = node.at("name");
    if (node.at("outputs").size() != 1) throw Error(fmt::format("node '{}' ({}) has several results", name, op));
    if (node["outputs"][0].value("dtype", "") != p.dtype && !(yields_bool(op) && node["outputs"][0].value("dtype", "") == "bool"))
      throw Error(fmt::format("node '{}' is {}, the fragment {}; mixed dtypes are not generated", name,
                              node["outputs"][0].value("dtype", ""), p.dtype));
    if (pointwise_ops().contains(op)) L.pointwise(node, pointwise_ops()[op]);
    else if (row_reductions().contains(op)) L.reduction(node, row_reductions()[op]);
    else if (scan_ops().contains(op)) L.scan(node, scan_ops()[op]);
    else if (reversal_ops().contains(op)) L.reversal(node, reversal_ops()[op], fragment.at("output"));
    else if (window_ops().contains(op)) L.window(node, window_ops()[op]);
    else if (gather_ops().contains(op)) L.gather(node, gather_ops()[op]);
    else if (view_ops().contains(op)) L.view(node);
    else if (pad_ops().contains(op) && pad_ops()[op].contains("pad")) L.pad(node, pad_ops()[op], fragment.at("output"));
    else throw Error(fmt::format("node '{}' ({}) is in neither data/ir/pointwise_ops.json nor data/ir/row_reductions.json", name, op));
    L.shape[name] = shape_of(node);
  }
  for (const auto& [name, i] : L.window_inputs)
    if (p.window[i].form.empty()) throw Error(fmt::format("fragment input '{}' is marked window, but no pool reads it", name));
  const bool flips = p.output_reversed || std::find(p.reversed.begin(), p.reversed.end(), true) != p.reversed.end();
  if (flips && !p.scan())
    throw Error("the fragment flips its rows without a scan; a generated kernel reverses a row only around a scan (a "
                "flip alone is PyTorch's copy)");
  if (p.padded() && !p.scan())
    throw Error("the fragment pads its rows without a scan; a generated kernel writes a pad only around the row it scans "
                "(a CTA or a warp owning the row): other kernels' pads stay PyTorch's");
  const bool row_inputs = std::find(p.inputs.begin(), p.inputs.end(), RowInputKind::per_row) != p.inputs.end();
  if (row_inputs && (p.flat() || p.scan()))
    throw Error("the fragment reads a per-row input without reducing its rows; a generated kernel reads one where it owns "
                "whole rows (a kernel with a reduction)");
  const std::string out = fragment.at("output");
  if (!L.var.count(out)) throw Error(fmt::format("the fragment's output '{}' is not one of its nodes", out));
  p.output = L.var.at(out);
  p.output_per_row = L.per_row.at(p.output);
  return p;
}

}  // namespace fact::discover
