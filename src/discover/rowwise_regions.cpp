#include "discover/rowwise_regions.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "core/error.h"
#include "discover/channels_last_chain.h"
#include "discover/plan.h"
#include "discover/row_program.h"
#include "discover/rowwise_fragment.h"

namespace fact::discover {
using nlohmann::json;

namespace {

// Connected groups of `free` nodes, each in graph order.
std::vector<std::vector<std::string>> components(const ir::Graph& g, const std::set<std::string>& free) {
  std::vector<std::vector<std::string>> out;
  std::set<std::string> done;
  for (const auto& n : g.nodes) {
    if (!free.count(n.name) || done.count(n.name)) continue;
    std::set<std::string> group;
    std::vector<std::string> stack = {n.name};
    done.insert(n.name);
    while (!stack.empty()) {
      std::string cur = stack.back();
      stack.pop_back();
      group.insert(cur);
      std::vector<std::string> next = ir::referenced_names(g.at(cur));
      for (const auto& u : g.users(cur)) next.push_back(u);
      for (const auto& m : next)
        if (free.count(m) && done.insert(m).second) stack.push_back(m);
    }
    std::vector<std::string> ordered;
    for (const auto& m : g.nodes)
      if (group.count(m.name)) ordered.push_back(m.name);
    out.push_back(ordered);
  }
  return out;
}

// When the fragment's full-sized value is read only by a whole-tensor reduction (mean(x) of a loss), the kernel
// makes that reduction's per-row partials instead (data/ir/row_reductions.json "whole_tensor"): the fragment
// gains the row reduction as its output, the match keeps its anchor (whose variable then holds the partials),
// and PyTorch's reduction reads rows values instead of rows x cols. Returns the reduction node, or "".
std::string end_in_row_partials(const ir::Graph& g, const RowwiseFragment& f, const std::set<std::string>& covered,
                                json& fragment) {
  const auto& users = g.users(f.output);
  const ir::Node* user = users.size() == 1 ? g.find(users[0]) : nullptr;  // a graph output is no node
  if (!user || user->kind != ir::NodeKind::Op || covered.count(user->name)) return "";
  const ir::Node& r = *user;
  std::string partials = row_partials_of(r.op);
  const ir::TensorMeta& x = g.at(f.output).out();
  bool plain = r.args.size() == 1 && ir::is_ref(r.args[0]) && ir::ref_name(r.args[0]) == f.output &&
               std::all_of(r.kwargs.begin(), r.kwargs.end(), [](const json& v) { return v.is_null(); });
  if (partials.empty() || !plain || x.shape != f.full_shape || f.rows < 2 || f.inner > 1) return "";
  json dims = json::array();
  for (int d = -f.trailing_dims; d < 0; ++d) dims.push_back(d);
  std::vector<int64_t> lead(f.full_shape.begin(), f.full_shape.end() - f.trailing_dims);
  std::string name = f.output + "__row_partials";
  fragment["nodes"].push_back({{"name", name}, {"op", partials}, {"args", {{{"ref", f.output}}, dims, false}},
                               {"kwargs", json::object()}, {"outputs", {{{"shape", lead}, {"dtype", x.dtype}}}}});
  fragment["output"] = name;
  return r.name;
}

// When the fragment's value is read only by a pad of its rows along the last dim (data/ir/row_reductions.json "pads": a
// constant_pad_nd, or a cat of it and fills, cat(zeros, cumsum(narrow(x))) of an exclusive scan), the fragment ends in
// that pad, as a constant_pad_nd node (what the kernel writes, and what the float64 replay runs). Returns the graph
// nodes it takes, the pad first, then its fills; {} when the user is no such pad.
std::vector<std::string> end_in_row_pad(const ir::Graph& g, const RowwiseFragment& f, const std::set<std::string>& covered,
                                        json& fragment) {
  const auto& users = g.users(f.output);
  const ir::Node* user = users.size() == 1 ? g.find(users[0]) : nullptr;
  const json* form = user ? pad_form(user->op) : nullptr;
  const ir::TensorMeta& x = g.at(f.output).out();
  if (!form || user->kind != ir::NodeKind::Op || covered.count(user->name) || user->outputs.size() != 1 ||
      x.shape != f.full_shape || f.inner > 1 || f.trailing_dims != 1)
    return {};
  const ir::Node& u = *user;
  const int rank = static_cast<int>(x.shape.size());
  auto arg = [&](const json& spec) { return op_argument(u.args, u.kwargs, spec); };
  std::vector<std::string> taken = {u.name};
  int64_t lo = 0, hi = 0;
  json value = 0;
  if (form->contains("pad")) {
    if (u.args.empty() || !ir::is_ref(u.args[0]) || ir::ref_name(u.args[0]) != f.output) return {};
    const json pads = arg(form->at("pad"));
    if (!pads.is_array() || pads.size() != 2 || !pads[0].is_number_integer() || !pads[1].is_number_integer()) return {};
    lo = pads[0];
    hi = pads[1];
    value = arg(form->at("value"));
    if (value.is_null()) value = 0;
  } else {
    const json pieces = arg(form->at("tensors")), dim = arg(form->at("dim"));
    if (!pieces.is_array() || !dim.is_number_integer() || (dim.get<int>() + rank) % rank != rank - 1) return {};
    bool seen = false;
    std::optional<double> constant;
    for (const auto& piece : pieces) {
      if (!ir::is_ref(piece)) return {};
      const std::string& name = ir::ref_name(piece);
      if (name == f.output) {
        if (seen) return {};
        seen = true;
        continue;
      }
      const ir::Node* fill = g.find(name);
      if (!fill || fill->kind != ir::NodeKind::Op || covered.count(name) || g.users(name).size() != 1 ||
          fill->outputs.size() != 1 || fill->out().dtype != x.dtype || fill->out().shape.size() != x.shape.size() ||
          !std::equal(x.shape.begin(), x.shape.end() - 1, fill->out().shape.begin()))
        return {};
      const std::optional<double> c = fill_constant(fill->op, fill->args, fill->kwargs);
      if (!c || (constant && !(*c == *constant || (std::isnan(*c) && std::isnan(*constant))))) return {};
      constant = c;
      (seen ? hi : lo) += fill->out().shape.back();
      taken.push_back(name);
    }
    if (!seen || !constant) return {};
    value = *constant;
    if (!std::isfinite(*constant))  // as the IR encodes a non-finite float (docs/ir-format.md)
      value = {{"float", std::isnan(*constant) ? "nan" : *constant > 0 ? "inf" : "-inf"}};
  }
  std::vector<int64_t> padded = x.shape;
  padded.back() += lo + hi;
  if (u.out().shape != padded) return {};
  json node = {{"name", u.name}, {"op", "aten.constant_pad_nd.default"}, {"kwargs", json::object()}};
  node["args"] = json::array({json{{"ref", f.output}}, json::array({lo, hi}), value});
  node["outputs"] = json::array({json{{"shape", padded}, {"dtype", x.dtype}}});
  fragment["nodes"].push_back(std::move(node));
  fragment["output"] = u.name;
  return taken;
}

// Whether the value of `pool` reaches a convolution of the plan through ops that keep channels-last order, and its
// input is one's value: a pool between two convolutions, which PyTorch runs on their channels-last tensors as they
// are (a generated kernel reads and writes PyTorch's order, so it would cost the chain a copy on each side).
bool between_convolutions(const ir::Graph& g, const std::string& pool, const std::map<std::string, const PlanEntry*>& owner) {
  auto conv = [&](const std::string& v) {
    auto it = owner.find(v);
    return it != owner.end() && it->second->match.family == "conv";
  };
  const ir::Node& n = g.at(pool);
  if (n.args.empty() || !ir::is_ref(n.args[0]) || !conv(ir::ref_name(n.args[0]))) return false;
  std::vector<std::string> stack = {pool};
  std::set<std::string> seen = {pool};
  while (!stack.empty()) {
    std::string cur = stack.back();
    stack.pop_back();
    for (const auto& u : g.users(cur)) {
      if (conv(u)) return true;
      const ir::Node* un = g.find(u);
      if (un && !owner.count(u) && keeps_channels_last(*un) && seen.insert(u).second) stack.push_back(u);
    }
  }
  return false;
}

// Why `nodes` cannot be one generated kernel, or "" when they can.
std::string not_generable(const ir::Graph& g, const std::vector<std::string>& nodes, const std::set<std::string>& covered) {
  try {
    lower_row_program(fragment_to_json(g, make_rowwise_fragment(g, nodes, covered)));
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

// `part` (graph order) with each node that passes its input on (a clone, a detach) moved to just before its first
// user there: a run of those alone computes nothing (so stays PyTorch's), inside their user's run they are free
// (level2/51's x.clone().detach() comes first in graph order and is read by the chain's last op).
std::vector<std::string> pass_throughs_by_their_users(const ir::Graph& g, std::vector<std::string> part) {
  for (size_t i = part.size(); i-- > 0;) {
    if (!is_identity_op(g.at(part[i]).op)) continue;
    const auto users = g.users(part[i]);
    auto first = std::find_if(part.begin() + i + 1, part.end(),
                              [&](const std::string& n) { return std::find(users.begin(), users.end(), n) != users.end(); });
    if (first == part.end()) continue;
    std::rotate(part.begin() + i, part.begin() + i + 1, first);  // part[i] moves to just before its first user
  }
  return part;
}

// `part` (graph order, pass-throughs by their users) cut into runs, each the longest that lowers to a row program
// from where the previous one ended; a run may close only a few nodes later (two values leave a prefix of a diamond
// until its join).
std::vector<std::vector<std::string>> generable_runs(const ir::Graph& g, const std::vector<std::string>& graph_order,
                                                     const std::set<std::string>& covered) {
  const std::vector<std::string> part = pass_throughs_by_their_users(g, graph_order);
  constexpr size_t kLookahead = 4;
  auto generable = [&](const std::vector<std::string>& nodes) { return not_generable(g, nodes, covered).empty(); };
  std::vector<std::vector<std::string>> runs;
  size_t start = 0;
  while (start < part.size()) {
    size_t best = 0;  // length of the longest generable run from start
    for (size_t len = 1; start + len <= part.size() && len <= best + kLookahead; ++len)
      if (generable({part.begin() + start, part.begin() + start + len})) best = len;
    if (best == 0) {
      ++start;  // generable alone earlier, but not from here: left to PyTorch
      continue;
    }
    runs.emplace_back(part.begin() + start, part.begin() + start + best);
    start += best;
  }
  return runs;
}

PlanEntry entry_for(const Plan& plan, const RowwiseFragment& f, const json& fragment, const CostContext& ctx,
                    int64_t partials, const std::vector<std::string>& pad) {
  Match m;
  m.rule = kGeneratedRowwiseRule;
  m.family = "rowwise";
  m.anchor = pad.empty() ? f.output : pad[0];  // a pad's value is what the graph reads
  m.nodes = f.nodes;
  if (!pad.empty()) {
    std::set<std::string> in(f.nodes.begin(), f.nodes.end());
    in.insert(pad.begin(), pad.end());
    m.nodes.clear();
    for (const auto& n : plan.graph.nodes)
      if (in.count(n.name)) m.nodes.push_back(n.name);
  }
  m.dtype = f.dtype;
  m.dims = {{"rows", f.rows}, {"cols", f.cols}};
  if (partials) m.dims["partials"] = partials;  // the kernel writes one value per row in place of the anchor's
  json operands = json::object();
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    m.inputs[fmt::format("$in{}", i)] = f.inputs[i];
    operands[fmt::format("in{}", i)] = fmt::format("$in{}", i);
  }
  m.kernel = {{"family", "rowwise"}, {"kind", "ir"}, {"fragment", fragment}, {"operands", operands}};
  (void)plan;
  return {m, estimate_match(m, ctx)};
}

}  // namespace

void add_generated_rowwise_entries(Plan& plan, const CostContext& ctx) {
  if (!plan.graph.replay_blocker.empty()) return;
  const ir::Graph& g = plan.graph;
  std::set<std::string> covered;
  std::map<std::string, const PlanEntry*> owner;
  for (const auto& e : plan.entries)
    for (const auto& n : e.match.nodes) {
      covered.insert(n);
      owner[n] = &e;
    }
  std::set<std::string> free;
  for (const auto& n : g.nodes) {
    if (n.kind != ir::NodeKind::Op || covered.count(n.name) || n.outputs.size() != 1 || !row_program_reads(n.op)) continue;
    // A view (a squeeze after a gather) joins the region of the node it reads; alone it would only start one.
    if (is_row_view_op(n.op) && !(!n.args.empty() && ir::is_ref(n.args[0]) && free.count(ir::ref_name(n.args[0]))))
      continue;
    free.insert(n.name);
  }
  // A normalization a rule matched alone (level2/34's LayerNorm) whose value only such free ops read is offered to
  // their region: one generated kernel then normalizes and runs the chain after it, one pass over the tensor instead
  // of two. Where that region cannot be generated it stays the rule's.
  std::set<std::string> offered, taken;
  for (const auto& e : plan.entries) {
    if (e.match.family != "normalization" || e.match.nodes.size() != 1) continue;
    const ir::Node& n = g.at(e.match.nodes[0]);
    const auto users = g.users(n.name);
    if (n.outputs.size() == 1 && row_program_reads(n.op) && !users.empty() &&
        std::all_of(users.begin(), users.end(), [&](const std::string& u) { return free.count(u) > 0; }))
      offered.insert(n.name);
  }
  for (const auto& n : offered) {
    covered.erase(n);
    free.insert(n);
  }
  std::vector<PlanEntry> added;
  auto try_group = [&](const std::vector<std::string>& group) {
    if (group.size() == 1 && is_window_op(g.at(group[0]).op) && between_convolutions(g, group[0], owner))
      throw Error("a pool alone between two convolutions stays PyTorch's: it keeps their channels-last order, which a "
                  "generated kernel (PyTorch's order in and out) would cost a copy on each side");
    RowwiseFragment f = make_rowwise_fragment(g, group, covered);
    json fragment = fragment_to_json(g, f);
    json padded = fragment;
    std::vector<std::string> pad = end_in_row_pad(g, f, covered, padded);
    if (!pad.empty()) {
      try {
        lower_row_program(padded);
        fragment = std::move(padded);
      } catch (const Error& e) {
        plan.notes.push_back(fmt::format("{} ({}) stays PyTorch's: {}", pad[0], g.at(pad[0]).op, e.what()));
        pad.clear();
      }
    }
    std::string whole = pad.empty() ? end_in_row_partials(g, f, covered, fragment) : "";
    RowProgram p = lower_row_program(fragment);  // refuses what the generator cannot write, naming why
    if (p.computes_nothing())
      throw Error("it only passes its input on (" + fmt::format("{}", fmt::join(p.ops, ", ")) +
                  "): PyTorch returns it without a copy, a kernel could only copy it");
    added.push_back(entry_for(plan, f, fragment, ctx, whole.empty() ? 0 : f.rows, pad));
    if (!pad.empty())
      plan.notes.push_back(fmt::format("{} ({}) pads the rows of {} with constant columns: the generated kernel writes "
                                       "them", pad[0], g.at(pad[0]).op, f.output));
    if (!whole.empty())
      plan.notes.push_back(fmt::format("{} ({}) reduces all of {}: the generated kernel makes its {} per-row partials "
                                       "and PyTorch's {} reduces them", whole, g.at(whole).op, f.output, f.rows,
                                       g.at(whole).op));
    for (const auto& in : f.inputs) {
      auto it = owner.find(in);
      if (p.reductions() > 0 && it != owner.end() && it->second->match.family == "gemm")
        plan.notes.push_back(fmt::format("reduction after gemm at {}: generated row-wise kernel reading its output "
                                         "once (a CTA of the GEMM does not own whole rows of N={})", in,
                                         g.at(in).out().shape.empty() ? f.cols : g.at(in).out().shape.back()));
    }
  };
  std::vector<std::vector<std::string>> groups = components(g, free);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const std::vector<std::string> group = groups[gi];
    std::string whole_error;
    try {
      try_group(group);
      for (const auto& n : group)
        if (offered.count(n)) {
          taken.insert(n);
          plan.notes.push_back(fmt::format("{} ({}) joins the generated row-wise kernel of the ops reading it (one pass "
                                           "over the tensor) instead of its rule's kernel", n, g.at(n).op));
        }
      continue;
    } catch (const Error& e) {
      // An offered normalization goes back to its rule; the rest of the region is cut as it would have been.
      std::set<std::string> rest;
      for (const auto& n : group)
        if (offered.count(n)) covered.insert(n);
        else rest.insert(n);
      if (rest.size() != group.size()) {
        for (auto& part : components(g, rest)) groups.push_back(std::move(part));
        continue;
      }
      if (group.size() == 1) {
        plan.notes.push_back(fmt::format("row-wise region {} left to PyTorch: {}", group[0], e.what()));
        continue;
      }
      whole_error = e.what();
    }
    // The region as a whole cannot be generated: leave out the nodes that cannot be generated alone (a
    // reduction over non-adjacent dims, an input shaped neither like the rows nor one row), then cut each part
    // that is left into the longest runs (graph order) that can be (a per-channel multiply after an instance
    // norm: each can, both in one kernel cannot).
    std::set<std::string> rest(group.begin(), group.end());
    for (const auto& n : group) {
      // A view goes with the node it reads (alone it is never a kernel).
      const ir::Node& node = g.at(n);
      if (is_row_view_op(node.op)) {
        if (!rest.count(ir::ref_name(node.args.at(0)))) rest.erase(n);
        continue;
      }
      if (std::string why = not_generable(g, {n}, covered); !why.empty()) {
        plan.notes.push_back(fmt::format("{} left to PyTorch: {}", n, why));
        rest.erase(n);
      }
    }
    for (const auto& part : components(g, rest)) {
      std::string why = whole_error;  // the whole group (nothing left out) already failed: not tried again
      if (part.size() != group.size()) {
        try {
          try_group(part);
          continue;
        } catch (const Error& e) {
          why = e.what();
        }
      }
      if (part.size() == 1) {
        plan.notes.push_back(fmt::format("row-wise region {} left to PyTorch: {}", part[0], why));
        continue;
      }
      plan.notes.push_back(fmt::format("row-wise region {} is not one kernel ({}); cut into runs that are",
                                       fmt::join(part, ", "), why));
      for (const auto& run : generable_runs(g, part, covered)) {
        try {
          try_group(run);
        } catch (const Error& e) {
          plan.notes.push_back(fmt::format("row-wise region {} left to PyTorch: {}", fmt::join(run, ", "), e.what()));
        }
      }
    }
  }
  std::erase_if(plan.entries, [&](const PlanEntry& e) {
    return e.match.nodes.size() == 1 && taken.count(e.match.nodes[0]) && e.match.rule != kGeneratedRowwiseRule;
  });
  for (auto& e : added) plan.entries.push_back(std::move(e));
}

}  // namespace fact::discover
