#include "discover/matcher.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "discover/shape_expr.h"

namespace fact::discover {

using Json = nlohmann::json;

namespace {

// One partial assignment of the pattern onto the graph. The search keeps every state that is still
// consistent, so alternatives (commutative order, optional nodes, op alternatives) need no undo.
struct State {
  std::map<std::string, std::string> bound;   // pattern node id -> graph node
  std::set<std::string> absent;               // optional pattern nodes standing in for their passthrough
  std::map<std::string, std::string> vars;    // "$x" -> graph node
  std::map<std::string, Json> attrs;
  std::vector<std::string> covered;           // graph op nodes in the match
};
using States = std::vector<State>;

// IR literals encode non-finite floats as {"float": "inf"}; compare them as numbers.
std::optional<double> as_number(const Json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_object() && v.size() == 1 && v.contains("float") && v["float"].is_string()) {
    const auto& s = v["float"].get_ref<const std::string&>();
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
    if (s == "nan") return NAN;
  }
  return std::nullopt;
}

bool literal_equal(const Json& graph_value, const Json& want, double tol) {
  auto g = as_number(graph_value);
  auto w = as_number(want);
  if (g && w) {
    if (std::isnan(*g) || std::isnan(*w)) return std::isnan(*g) && std::isnan(*w);
    if (std::isinf(*g) || std::isinf(*w)) return *g == *w;
    return std::fabs(*g - *w) <= tol + 1e-12 * std::fabs(*w);
  }
  if (graph_value.is_array() && want.is_array()) {
    if (graph_value.size() != want.size()) return false;
    for (size_t i = 0; i < want.size(); ++i)
      if (!literal_equal(graph_value[i], want[i], tol)) return false;
    return true;
  }
  return graph_value == want;
}

bool has_type(const Json& v, const std::string& type) {
  if (type == "number") return as_number(v).has_value();
  if (type == "int") return v.is_number_integer();
  if (type == "bool") return v.is_boolean();
  if (type == "string") return v.is_string();
  if (type == "list") return v.is_array();
  if (type == "null") return v.is_null();
  return false;
}

bool set_attr(State& s, const std::string& name, const Json& value) {
  auto it = s.attrs.find(name);
  if (it != s.attrs.end()) return literal_equal(it->second, value, 0);
  s.attrs[name] = value;
  return true;
}

bool merge_attrs(State& s, const Json& attrs) {
  if (!attrs.is_object()) return true;
  for (const auto& [k, v] : attrs.items())
    if (!set_attr(s, k, v)) return false;
  return true;
}

void add_covered(State& s, const std::string& node) {
  if (std::find(s.covered.begin(), s.covered.end(), node) == s.covered.end()) s.covered.push_back(node);
}

class RuleMatcher {
 public:
  RuleMatcher(const ir::Graph& g, const Rule& rule, const ir::OpTable& ops) : g_(g), rule_(rule), ops_(ops) {
    for (const auto& n : rule.pattern["nodes"]) nodes_[n["id"].get<std::string>()] = &n;
  }

  States match_anchor(const std::string& anchor) {
    return match_node(rule_.pattern["output"].get<std::string>(), anchor, State{});
  }

 private:
  const ir::Graph& g_;
  const Rule& rule_;
  const ir::OpTable& ops_;
  std::map<std::string, const Json*> nodes_;

  static void append(States& to, States from) {
    for (auto& s : from) to.push_back(std::move(s));
  }

  States match_node(const std::string& pid, const std::string& gname, const State& s) {
    if (auto it = s.bound.find(pid); it != s.bound.end()) return it->second == gname ? States{s} : States{};
    const Json& pnode = *nodes_.at(pid);
    const ir::Node& gnode = g_.at(gname);
    States out;
    if (gnode.kind == ir::NodeKind::Op) {
      if (pnode.contains("alternatives")) {
        for (const auto& form : pnode["alternatives"]) append(out, match_form(pid, form, pnode, gnode, s));
      } else {
        append(out, match_form(pid, pnode, pnode, gnode, s));
      }
    }
    if (pnode.value("optional", false)) {
      // Absent: the node's consumer reads the passthrough value directly.
      State a = s;
      a.bound[pid] = gname;
      a.absent.insert(pid);
      if (merge_attrs(a, pnode.value("attrs_if_absent", Json::object())))
        append(out, match_value(pnode["passthrough"], gname, a));
    }
    return out;
  }

  static bool op_listed(const Json& op, const std::string& name) {
    if (op.is_string()) return op == name;
    return std::any_of(op.begin(), op.end(), [&](const Json& o) { return o == name; });
  }

  States match_form(const std::string& pid, const Json& form, const Json& pnode, const ir::Node& gnode,
                    const State& s) {
    if (!op_listed(form["op"], gnode.op)) return {};
    const Json args = form.value("args", Json::array());
    const Json kwargs = form.value("kwargs", Json::object());
    if (gnode.args.size() > args.size()) return {};
    for (const auto& [k, v] : gnode.kwargs.items())
      if (!kwargs.contains(k)) return {};
    State start = s;
    start.bound[pid] = gnode.name;
    add_covered(start, gnode.name);
    if (!merge_attrs(start, pnode.value("attrs", Json::object())) ||
        (&form != &pnode && !merge_attrs(start, form.value("attrs", Json::object()))))
      return {};

    std::vector<Json> orders{args};
    const ir::OpInfo* info = ops_.find(gnode.op);
    if (info && info->commutative && args.size() >= 2) {
      Json swapped = args;
      std::swap(swapped[0], swapped[1]);
      orders.push_back(swapped);
    }
    States out;
    for (const auto& order : orders) {
      States states{start};
      for (size_t i = 0; i < order.size() && !states.empty(); ++i) {
        const Json* garg = i < gnode.args.size() ? &gnode.args[i] : nullptr;
        States next;
        for (const auto& st : states) append(next, match_arg(order[i], garg, st));
        states = std::move(next);
      }
      for (const auto& [k, parg] : kwargs.items()) {
        if (states.empty()) break;
        const Json* garg = gnode.kwargs.contains(k) ? &gnode.kwargs[k] : nullptr;
        States next;
        for (const auto& st : states) append(next, match_arg(parg, garg, st));
        states = std::move(next);
      }
      append(out, std::move(states));
    }
    return out;
  }

  // `target` is a pattern node id, a "$var", or an object with "node"/"var" (and maybe "through").
  States match_value(const Json& target, const std::string& gname, const State& s) {
    if (target.is_string()) {
      const auto& t = target.get_ref<const std::string&>();
      return t[0] == '$' ? bind_var(t, gname, s) : match_node(t, gname, s);
    }
    const bool is_var = target.contains("var");
    const std::string name = is_var ? target["var"].get<std::string>() : target["node"].get<std::string>();
    // The chain of view-like nodes the value can be reached through: gname, its source, ...
    std::vector<std::string> chain{gname};
    if (target.contains("through")) {
      for (;;) {
        const ir::Node& n = g_.at(chain.back());
        if (n.kind != ir::NodeKind::Op || !op_listed(target["through"], n.op) || n.args.empty() ||
            !ir::is_ref(n.args[0]))
          break;
        chain.push_back(ir::ref_name(n.args[0]));
      }
    }
    // A variable binds as far back as it can (the stepped-over views join the match);
    // a pattern node is tried nearest first.
    std::vector<size_t> depths(chain.size());
    for (size_t i = 0; i < chain.size(); ++i) depths[i] = is_var ? chain.size() - 1 - i : i;
    States out;
    for (size_t d : depths) {
      State st = s;
      for (size_t i = 0; i < d; ++i) add_covered(st, chain[i]);
      append(out, is_var ? bind_var(name, chain[d], st) : match_node(name, chain[d], st));
    }
    return out;
  }

  static States bind_var(const std::string& var, const std::string& gname, const State& s) {
    auto it = s.vars.find(var);
    if (it != s.vars.end()) return it->second == gname ? States{s} : States{};
    State st = s;
    st.vars[var] = gname;
    return {st};
  }

  // garg is the graph's argument, or nullptr when the call leaves it out.
  States match_arg(const Json& parg, const Json* garg, const State& s) {
    if (parg.is_string()) {
      if (!garg || !ir::is_ref(*garg)) return {};
      return match_value(parg, ir::ref_name(*garg), s);
    }
    if (parg.is_array()) {  // a list (cat's tensors): element by element, so it may hold pattern refs
      if (!garg || !garg->is_array() || garg->size() != parg.size()) return {};
      States states{s};
      for (size_t i = 0; i < parg.size() && !states.empty(); ++i) {
        States next;
        for (const auto& st : states) append(next, match_arg(parg[i], &(*garg)[i], st));
        states = std::move(next);
      }
      return states;
    }
    if (!parg.is_object()) {  // a plain literal must be equal
      if (!garg) return {};
      return literal_equal(*garg, parg, 0) ? States{s} : States{};
    }
    Json value;
    if (garg) value = *garg;
    else if (parg.contains("default")) value = parg["default"];
    else return {};
    if (parg.contains("var") || parg.contains("node")) {
      if (ir::is_ref(value)) return match_value(parg, ir::ref_name(value), s);
      return (value.is_null() && parg.value("nullable", false)) ? States{s} : States{};
    }
    if (parg.value("any", false)) return bind_literal(parg, value, s);
    if (ir::is_ref(value)) return {};
    double tol = parg.value("tol", 0.0);
    if (parg.contains("const") && !literal_equal(value, parg["const"], tol)) return {};
    if (parg.contains("in")) {
      bool found = false;
      for (const auto& option : parg["in"]) found = found || literal_equal(value, option, tol);
      if (!found) return {};
    }
    if (parg.contains("type") && !has_type(value, parg["type"].get<std::string>())) return {};
    if (parg.contains("len") && (!value.is_array() || value.size() != parg["len"].get<size_t>())) return {};
    return bind_literal(parg, value, s);
  }

  static States bind_literal(const Json& parg, const Json& value, const State& s) {
    if (!parg.contains("attr")) return {s};
    Json v = value;
    if (parg.value("transform", "") == "reciprocal") {
      auto n = as_number(value);
      if (!n || *n == 0) return {};
      v = 1.0 / *n;
    }
    State st = s;
    if (!set_attr(st, parg["attr"].get<std::string>(), v)) return {};
    return {st};
  }
};

// Evaluates a rule's dims (in any order: a dim may use another) and constraints for one state.
class DimEvaluator {
 public:
  DimEvaluator(const ir::Graph& g, const Rule& rule, const ArchSpec& arch, const State& s, const std::string& where)
      : g_(g), rule_(rule), arch_(arch), s_(s), where_(where) {
    ctx_.name = [this](const std::string& n) { return lookup(n); };
    ctx_.tensor = [this](const std::string& ref) { return tensor(ref); };
  }

  std::map<std::string, int64_t> dims() {
    std::map<std::string, int64_t> out;
    for (const auto& [name, expr] : rule_.dims.items()) {
      double v = *lookup(name);
      if (!std::isfinite(v) || v != std::floor(v))
        throw Error(where_ + " dim '" + name + "' = " + expr.get<std::string>() + " is " + std::to_string(v) +
                    ", not an integer");
      out[name] = static_cast<int64_t>(v);
    }
    return out;
  }

  // The first constraint that does not hold, with the values of the rule dims and pattern attrs it read (the names
  // the expression itself looked up, not those of the dims they are made of).
  std::optional<std::string> failed_constraint() {
    for (const auto& c : rule_.constraints) {
      std::vector<std::string> read;
      auto plain = ctx_.name;
      ctx_.name = [&](const std::string& n) {
        auto v = lookup(n);
        std::string seen = v ? fmt::format("{} = {}", n, *v) : "";
        if (busy_.empty() && (rule_.dims.contains(n) || s_.attrs.count(n)) && !seen.empty() &&
            std::find(read.begin(), read.end(), seen) == read.end())
          read.push_back(std::move(seen));
        return v;
      };
      double holds = 0;
      try {
        holds = eval(c, "constraint");
      } catch (...) {
        ctx_.name = plain;
        throw;
      }
      ctx_.name = plain;
      if (holds != 0) continue;
      const std::string& text = c;
      return read.empty() ? text : fmt::format("{} ({})", text, fmt::join(read, ", "));
    }
    return std::nullopt;
  }

 private:
  const ir::Graph& g_;
  const Rule& rule_;
  const ArchSpec& arch_;
  const State& s_;
  const std::string& where_;
  ExprContext ctx_;
  std::map<std::string, double> done_;
  std::set<std::string> busy_;

  double eval(const std::string& text, const std::string& what) {
    try {
      return ShapeExpr::parse(text).eval(ctx_);
    } catch (const Error& e) {
      if (std::string(e.what()).rfind(where_, 0) == 0) throw;
      throw Error(where_ + " " + what + ": " + e.what());
    }
  }

  std::optional<double> lookup(const std::string& n) {
    if (auto it = done_.find(n); it != done_.end()) return it->second;
    // A dim may copy the attr of its own name ("causal": "causal"); inside itself the name means the attr.
    if (rule_.dims.contains(n) && !busy_.count(n)) {
      busy_.insert(n);
      double v = eval(rule_.dims[n].get<std::string>(), "dim '" + n + "'");
      busy_.erase(n);
      return done_[n] = v;
    }
    if (auto it = s_.attrs.find(n); it != s_.attrs.end()) {
      if (it->second.is_boolean()) return it->second.get<bool>() ? 1.0 : 0.0;
      if (auto num = as_number(it->second)) return *num;
      throw Error(where_ + " attr '" + n + "' = " + it->second.dump() + " is not a number or boolean");
    }
    if (busy_.count(n)) throw Error(where_ + " dim '" + n + "' depends on itself and no attr has that name");
    try {
      return arch_.constant(n);
    } catch (const Error&) {
      return std::nullopt;
    }
  }

  const ir::TensorMeta* tensor(const std::string& ref) {
    std::string node;
    if (ref[0] == '$') {
      auto it = s_.vars.find(ref);
      if (it == s_.vars.end()) return nullptr;
      node = it->second;
    } else {
      auto it = s_.bound.find(ref.substr(1));
      if (it == s_.bound.end()) return nullptr;
      node = it->second;
    }
    const ir::Node& n = g_.at(node);
    return n.outputs.empty() ? nullptr : &n.outputs[0];
  }
};

// Intermediates (covered nodes other than the anchor) must feed only nodes inside the match, except the
// rule's extra outputs. Those may have outside users, all after the anchor in graph order: the fused op
// runs at the anchor, so whatever reads an extra output must come later. Fills `exported` (pattern id ->
// graph node) with the extra outputs that do have outside users. False if the match is not self-contained.
bool self_contained(const ir::Graph& g, const Rule& rule, const State& s, const std::string& anchor,
                    std::map<std::string, std::string>& exported) {
  std::set<std::string> inside(s.covered.begin(), s.covered.end());
  std::map<std::string, std::string> extra;  // graph node -> pattern id
  for (const auto& id : rule.pattern.value("extra_outputs", Json::array())) {
    auto it = s.bound.find(id.get<std::string>());
    if (it != s.bound.end() && !s.absent.count(it->first)) extra[it->second] = it->first;
  }
  const size_t anchor_at = g.index_of(anchor);
  for (const auto& n : s.covered) {
    if (n == anchor) continue;
    auto ex = extra.find(n);
    for (const auto& u : g.users(n)) {
      if (inside.count(u)) continue;
      if (ex == extra.end() || (u != "<output>" && g.index_of(u) < anchor_at)) return false;
      exported[ex->second] = n;
    }
  }
  return true;
}

// A kernel operand bound to a node the match itself computes (linear + linear read as bias + residual) would be
// read before the fused kernel writes it.
bool operand_is_covered(const Rule& rule, const State& s) {
  const nlohmann::json ops = rule.kernel.value("operands", nlohmann::json::object());
  for (const auto& [slot, var] : ops.items()) {
    if (!var.is_string()) continue;
    auto it = s.vars.find(var.get<std::string>());
    if (it != s.vars.end() && std::find(s.covered.begin(), s.covered.end(), it->second) != s.covered.end()) return true;
  }
  return false;
}

}  // namespace

std::vector<Match> find_all_matches(const ir::Graph& graph, const PatternRegistry& registry, const ir::OpTable& ops,
                                    const ArchSpec& arch, std::vector<std::string>* skipped,
                                    std::vector<NearMiss>* near_misses) {
  std::vector<Match> out;
  for (const auto& node : graph.nodes) {
    if (node.kind != ir::NodeKind::Op || node.outputs.empty()) continue;
    const std::string& dtype = node.outputs[0].dtype;
    for (const Rule* rule : registry.select(dtype, arch.name)) {
      const std::string where = "rule '" + rule->name + "' (" + rule->file.string() + ") at node '" + node.name + "'";
      // A rule that cannot read this node (arguments of a shape no rule author foresaw) does not match here;
      // the rest of the graph is still matched.
      try {
      RuleMatcher matcher(graph, *rule, ops);
      for (State& s : matcher.match_anchor(node.name)) {
        if (s.absent.count(rule->pattern["output"].get<std::string>())) continue;
        std::sort(s.covered.begin(), s.covered.end(),
                  [&](const std::string& a, const std::string& b) { return graph.index_of(a) < graph.index_of(b); });
        std::map<std::string, std::string> exported;
        if (!self_contained(graph, *rule, s, node.name, exported)) continue;
        if (operand_is_covered(*rule, s)) continue;
        DimEvaluator dims(graph, *rule, arch, s, where);
        if (auto why = dims.failed_constraint()) {
          if (near_misses) near_misses->push_back({node.name, rule->name, *why});
          continue;
        }
        Match m;
        m.rule = rule->name;
        m.family = rule->family;
        m.anchor = node.name;
        m.nodes = s.covered;
        m.extra_outputs = std::move(exported);
        m.inputs = s.vars;
        m.attrs = s.attrs;
        m.dims = dims.dims();
        m.dtype = dtype;
        m.kernel = rule->kernel;
        for (size_t i = 0; i < rule->examples.size(); ++i) {
          const auto& archs = rule->example_archs[i];
          if (archs.empty() || std::find(archs.begin(), archs.end(), arch.name) != archs.end())
            m.examples.push_back(rule->examples[i]);
        }
        m.priority = rule->priority;
        out.push_back(std::move(m));
        break;  // the first consistent assignment is the match for this rule and anchor
      }
      } catch (const std::exception& e) {
        if (skipped) skipped->push_back(where + " skipped: " + e.what());
      }
    }
  }
  return out;
}

std::vector<Match> resolve_overlaps(std::vector<Match> matches, const std::function<double(const Match&)>& gain) {
  std::vector<std::pair<double, size_t>> order;
  for (size_t i = 0; i < matches.size(); ++i) order.emplace_back(gain(matches[i]), i);
  // Input order (graph order from find_all_matches) breaks the remaining ties.
  std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    const Match& ma = matches[a.second];
    const Match& mb = matches[b.second];
    if (a.first != b.first) return a.first > b.first;
    if (ma.priority != mb.priority) return ma.priority > mb.priority;
    return ma.nodes.size() > mb.nodes.size();
  });
  std::set<std::string> taken;
  std::vector<size_t> kept;
  for (const auto& [g, i] : order) {
    const Match& m = matches[i];
    if (std::any_of(m.nodes.begin(), m.nodes.end(), [&](const std::string& n) { return taken.count(n) > 0; }))
      continue;
    taken.insert(m.nodes.begin(), m.nodes.end());
    kept.push_back(i);
  }
  // Hand the survivors back in input (graph) order, which is how later stages walk them.
  std::sort(kept.begin(), kept.end());
  std::vector<Match> out;
  for (size_t i : kept) out.push_back(std::move(matches[i]));
  return out;
}

}  // namespace fact::discover
