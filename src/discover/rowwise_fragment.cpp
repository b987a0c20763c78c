#include "discover/rowwise_fragment.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "discover/plan.h"
#include "discover/row_program.h"

namespace fact::discover {
using nlohmann::json;

namespace {

bool rowwise_category(ir::OpCategory c) {
  return c == ir::OpCategory::Elementwise || c == ir::OpCategory::Reduction || c == ir::OpCategory::Softmax ||
         c == ir::OpCategory::Normalization;
}

json tensor_json(const ir::TensorMeta& t) { return {{"shape", t.shape}, {"dtype", t.dtype}}; }

json node_json(const ir::Node& n) {
  json outs = json::array();
  for (const auto& o : n.outputs) outs.push_back(tensor_json(o));
  return {{"name", n.name}, {"op", n.op}, {"args", n.args}, {"kwargs", n.kwargs}, {"outputs", outs}};
}

// The dims a broadcast input spans, when it is one row of the full tensor: right-aligned to the full rank, its
// dims other than 1 form one run equal to the full tensor's there ([C, 1, 1] over [N, C, H, W]: dim 1);
// count 0 when it is not such a row.
ReducedDims broadcast_row_dims(const std::vector<int64_t>& in, const std::vector<int64_t>& full) {
  const int rank = static_cast<int>(full.size()), pad = rank - static_cast<int>(in.size());
  if (pad < 0) return {};
  int first = -1, last = -1;
  for (int d = 0; d < rank; ++d) {
    int64_t v = d < pad ? 1 : in[d - pad];
    if (v == 1) continue;
    if (v != full[d] || (last >= 0 && last != d - 1)) return {};
    if (first < 0) first = d;
    last = d;
  }
  return first < 0 ? ReducedDims{} : ReducedDims{first, last - first + 1};
}

// A literal as a pattern argument: numbers compare by value as they are; anything else (strings would read
// as node references, objects as argument constraints) is wrapped in {"const": v}.
json pattern_literal(const json& v) {
  if (v.is_number() || v.is_boolean()) return v;
  if (v.is_array()) {
    bool plain = std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_number() || e.is_boolean(); });
    if (plain) return v;
  }
  return {{"const", v}};
}

// Whether `input` is read inside the fragment only as a per-channel vector of a norm (instance_norm, group_norm:
// data/ir/row_reductions.json's "weight" / "bias" of those forms; batch_norm's four: data/ir/pointwise_ops.json).
bool per_channel_arg(const ir::Graph& graph, const std::vector<std::string>& nodes, const std::string& input) {
  bool read = false;
  for (const auto& name : nodes) {
    const ir::Node& n = graph.at(name);
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (!ir::is_ref(n.args[i]) || ir::ref_name(n.args[i]) != input) continue;
      if (!channel_vector_arg(n.op, static_cast<int>(i))) return false;
      read = true;
    }
  }
  return read;
}

}  // namespace

RowwiseFragment make_rowwise_fragment(const ir::Graph& graph, const std::vector<std::string>& names, const std::set<std::string>& covered) {
  if (names.empty()) throw Error("the fragment names no nodes; list the graph nodes to fuse");
  std::set<std::string> inside(names.begin(), names.end());
  if (inside.size() != names.size()) throw Error("the fragment lists a node twice");
  RowwiseFragment f;
  for (const auto& n : graph.nodes)
    if (inside.count(n.name)) f.nodes.push_back(n.name);
  for (const auto& name : names) {
    const ir::Node* n = graph.find(name);
    if (!n) throw Error(fmt::format("node '{}' is not in the graph", name));
    if (n->kind != ir::NodeKind::Op) throw Error(fmt::format("node '{}' is a {}, not an op", name, ir::to_string(n->kind)));
    if (covered.count(name)) throw Error(fmt::format("node '{}' is already covered by a rule of the plan", name));
    // By category, or by the row program's own tables (a reversal, a gather, a view, a copy it reads as identity:
    // level2/51's x.clone().detach() of the residual).
    if (!rowwise_category(n->category) && !row_program_reads(n->op))
      throw Error(fmt::format("node '{}' ({}) is not an elementwise, reduction, softmax or normalization op", name, n->op));
    if (n->outputs.size() != 1) throw Error(fmt::format("node '{}' has {} results; a row-wise kernel takes one", name, n->outputs.size()));
  }
  // Exactly one value may leave the fragment.
  for (const auto& name : f.nodes) {
    const auto& users = graph.users(name);
    bool leaves = std::any_of(users.begin(), users.end(), [&](const std::string& u) { return !inside.count(u); });
    if (leaves) {
      if (!f.output.empty())
        throw Error(fmt::format("both '{}' and '{}' are used outside the fragment; it must have one output", f.output, name));
      f.output = name;
    }
  }
  if (f.output.empty()) throw Error("no node of the fragment is used outside it, so it computes nothing the graph needs");
  const ir::TensorMeta& out = graph.at(f.output).out();
  if (out.dtype != "float32" && out.dtype != "bfloat16" && out.dtype != "float16")
    throw Error(fmt::format("output '{}' is {}; row-wise kernels take float32, bfloat16 or float16", f.output, out.dtype));
  f.dtype = out.dtype;
  // The full tensor: the largest value the fragment reads or makes; its trailing dims that the reductions
  // fold make a row (all reductions must fold the same ones).
  std::vector<std::string> outside;
  for (const auto& name : f.nodes)
    for (const auto& r : ir::referenced_names(graph.at(name)))
      if (!inside.count(r) && !graph.at(r).outputs.empty() &&
          std::find(outside.begin(), outside.end(), r) == outside.end())
        outside.push_back(r);
  // A pool's input (a window input) is read only through the pool's window: the pool's output is of the full tensor.
  std::set<std::string> pooled;
  for (const auto& name : f.nodes) {
    const ir::Node& n = graph.at(name);
    if (!is_window_op(n.op)) continue;
    if (n.args.empty() || !ir::is_ref(n.args[0]))
      throw Error(fmt::format("node '{}' ({}) pools no tensor", name, n.op));
    const std::string& src = ir::ref_name(n.args[0]);
    if (inside.count(src))
      throw Error(fmt::format("node '{}' ({}) pools '{}', a value made inside the fragment; a generated kernel pools a "
                              "tensor in memory", name, n.op, src));
    pooled.insert(src);
  }
  // Each read once in the fragment: by its pool.
  for (const auto& src : pooled) {
    std::vector<std::string> readers;
    for (const auto& name : f.nodes)
      for (const auto& r : ir::referenced_names(graph.at(name)))
        if (r == src) readers.push_back(name);
    if (readers.size() != 1)
      throw Error(fmt::format("'{}' is read by {} in the fragment; a pool's input is read through its window only", src,
                              fmt::join(readers, ", ")));
  }
  // The largest value; of equal sizes the one of more dims, which a reduction's dims index (KernelBench level2/42's
  // sum over dims [2, 3] of a [16, 1, 1, 1] tensor, whose [16, 1] result has as many elements).
  const ir::TensorMeta* full = &out;
  auto larger = [&](const ir::TensorMeta& t) {
    return t.numel() > full->numel() || (t.numel() == full->numel() && t.rank() > full->rank());
  };
  for (const auto& v : outside)
    if (!pooled.count(v) && larger(graph.at(v).out())) full = &graph.at(v).out();
  for (const auto& name : f.nodes)
    if (larger(graph.at(name).out())) full = &graph.at(name).out();
  f.full_shape = full->shape;
  const int rank = static_cast<int>(f.full_shape.size());
  if (rank < 1 || f.full_shape.back() < 1) throw Error(fmt::format("the fragment's values have no last dimension"));
  ReducedDims row_dims;
  for (const auto& name : f.nodes) {
    const ir::Node& n = graph.at(name);
    // A reduction's dims are its operand's, which may be the full tensor with dims of extent 1 added or dropped.
    const bool self = !n.args.empty() && ir::is_ref(n.args[0]);
    ReducedDims k = row_reduction_dims_of(name, n.op, n.args, n.kwargs,
                                          self ? graph.at(ir::ref_name(n.args[0])).out().shape : f.full_shape, f.full_shape);
    if (k.count == 0) continue;
    if (row_dims.count && !(k == row_dims))
      throw Error(fmt::format("node '{}' reduces dims {}..{}, another node dims {}..{}; one row per kernel", name, k.first,
                              k.first + k.count - 1, row_dims.first, row_dims.first + row_dims.count - 1));
    row_dims = k;
  }
  if (!row_dims.count) {
    // Pointwise only: rows along the last dim, or along the dims a broadcast input spans (a per-channel bias
    // [C, 1, 1] makes rows of the C channels, strided by H*W) so that it is one row shared by all.
    row_dims = {rank - 1, 1};
    for (const auto& v : outside) {
      const ir::TensorMeta& in = graph.at(v).out();
      ReducedDims b = broadcast_row_dims(in.shape, f.full_shape);
      if (in.shape != f.full_shape && b.count) {
        row_dims = b;
        break;
      }
    }
  }
  f.trailing_dims = row_dims.count;
  f.inner_dims = row_dims.after(rank);
  f.groups = row_dims.groups;
  const auto dim = f.full_shape.begin();
  std::vector<int64_t> lead(dim, dim + row_dims.first), trail(dim + row_dims.first, dim + row_dims.first + row_dims.count);
  std::vector<int64_t> behind(dim + row_dims.first + row_dims.count, f.full_shape.end());
  if (f.groups > 1 && (trail.empty() || trail[0] % f.groups || f.inner_dims > 0))
    throw Error(fmt::format("the fragment's rows split dim {} ({}) into {} groups, which do not divide it", row_dims.first,
                            trail.empty() ? 0 : trail[0], f.groups));
  f.cols = 1;
  for (auto d : trail) f.cols *= d;
  f.cols /= f.groups;
  for (auto d : behind) f.inner *= d;
  f.rows = full->numel() / f.cols;
  for (int d = 2; d < rank; ++d) f.channel_inner *= f.full_shape[d];
  std::vector<int64_t> drop = lead;
  drop.insert(drop.end(), behind.begin(), behind.end());
  // Dims of extent 1 aside: views (squeeze, unsqueeze) keep the elements and their order.
  auto per_row = [&](const std::vector<int64_t>& s) { return same_but_unit_dims(s, drop); };
  for (const auto& name : f.nodes) {
    const ir::TensorMeta& t = graph.at(name).out();
    if (!same_but_unit_dims(t.shape, f.full_shape) && !per_row(t.shape))
      throw Error(fmt::format("node '{}' has shape [{}]; inside a row-wise fragment every value is [{}] or one per row",
                              name, fmt::join(t.shape, ","), fmt::join(f.full_shape, ",")));
    if (t.dtype != f.dtype && !(t.dtype == "bool" && yields_bool(graph.at(name).op)))
      throw Error(fmt::format("node '{}' is {} but the output is {}; mixed dtypes are not row-wise kernels", name, t.dtype, f.dtype));
  }
  for (const auto& r : outside) {
    const ir::TensorMeta& in = graph.at(r).out();
    if (pooled.count(r)) {
      if (in.dtype != f.dtype)
        throw Error(fmt::format("input '{}' is {} but the output is {}; mixed dtypes are not row-wise kernels", r, in.dtype, f.dtype));
      f.inputs.push_back(r);
      f.boolean.push_back(false);
      f.per_row.push_back(false);
      f.index.push_back(false);
      f.broadcast.push_back(true);  // read at its base whatever the row (the window's position comes from the element)
      f.channels.push_back(0);
      f.window.push_back(true);
      continue;
    }
    bool like_full = in.shape == f.full_shape;
    // A norm's [C] vector indexes dim 1 whatever the rows are, even where it has the row's length (BatchNorm over
    // [N, 64, 64, 64]: rows of W = 64); a plain [C] operand broadcasts along the last dim, as PyTorch's rules say.
    const bool norm_vector = rank > 2 && f.inner == 1 && in.numel() == f.full_shape[1] && per_channel_arg(graph, f.nodes, r);
    bool row = !norm_vector && f.groups == 1 && (broadcast_row_dims(in.shape, f.full_shape) == ReducedDims{row_dims.first, row_dims.count} ||
                                 (f.inner == 1 && (in.shape == trail || (in.rank() == 1 && in.shape[0] == f.cols))));
    // One value per channel (dim 1 of a rank >= 2 tensor) where rows are not channels: a norm's [C] weight, or a
    // [C, 1, ..] broadcast; element f reads channel (f / channel_inner) % C. Contiguous rows only.
    bool channel = !like_full && !row && f.inner == 1 && rank >= 2 && in.numel() == f.full_shape[1] &&
                   (per_channel_arg(graph, f.nodes, r) ||
                    broadcast_row_dims(in.shape, f.full_shape) == ReducedDims{1, 1});
    // One value for all (a 0-d tensor: torch.min(x, torch.tensor(c))): a per-channel input of one channel.
    const bool scalar = !like_full && !row && !channel && f.inner == 1 && in.numel() == 1;
    channel = channel || scalar;
    // One value per row: the reduced dims kept as 1 ([rows, 1]: a gather's index) or dropped (how full values may read
    // it is checked below, with the nodes' values).
    const bool row_value = !like_full && !row && !channel && per_row(in.shape);
    // An int64 input is a gather's index ([rows, 1]), read by gathers alone.
    bool index = false;
    if (in.dtype == "int64" && row_value) {
      index = true;
      for (const auto& name : f.nodes) {
        const ir::Node& n = graph.at(name);
        for (size_t a = 0; a < n.args.size(); ++a)
          if (ir::is_ref(n.args[a]) && ir::ref_name(n.args[a]) == r && !(is_gather_op(n.op) && a == 2)) index = false;
      }
    }
    if (!like_full && !row && !channel && !row_value) {
      std::vector<int64_t> one_row(f.full_shape.size(), 1);
      std::copy(trail.begin(), trail.end(), one_row.begin() + row_dims.first);
      throw Error(fmt::format("input '{}' has shape [{}]; outside inputs must be [{}] or one row [{}]", r,
                              fmt::join(in.shape, ","), fmt::join(f.full_shape, ","), fmt::join(one_row, ",")));
    }
    // A bool input (a mask) is read as 1 or 0, as PyTorch promotes it in arithmetic with the fragment's dtype.
    if (in.dtype != f.dtype && in.dtype != "bool" && !index)
      throw Error(fmt::format("input '{}' is {} but the output is {}; mixed dtypes are not row-wise kernels", r, in.dtype, f.dtype));
    f.inputs.push_back(r);
    f.boolean.push_back(in.dtype == "bool");
    f.per_row.push_back(row_value);
    f.index.push_back(index);
    f.broadcast.push_back((row || channel || row_value) && !like_full);  // a channel input is read whole by every row too
    f.channels.push_back(scalar ? 1 : channel ? f.full_shape[1] : 0);
    f.window.push_back(false);
  }
  // A value that is one per row, read with full values: PyTorch broadcasts it right-aligned, so the kernel's one value
  // a row is that only where it is 1 along the rows' dims ([rows, 1]); as [rows] it lines up with the last dim
  // (x / x.sum(1) over [N, N] divides by column sums).
  for (const auto& name : f.nodes) {
    const ir::Node& n = graph.at(name);
    if (f.groups != 1 || f.cols == 1 || !same_but_unit_dims(n.out().shape, f.full_shape)) continue;
    for (const auto& r : ir::referenced_names(n)) {
      const std::vector<int64_t>& s = graph.at(r).out().shape;
      const auto input = std::find(f.inputs.begin(), f.inputs.end(), r);
      const bool row_value = input == f.inputs.end() ? inside.count(r) && per_row(s) : f.per_row[input - f.inputs.begin()];
      if (!row_value || broadcasts_per_row(s, n.out().shape, f.full_shape, row_dims)) continue;
      throw Error(fmt::format("'{}' reads '{}' [{}], one value per row, with full values [{}], which broadcasts it along "
                              "other dims than the rows'", name, r, fmt::join(s, ","), fmt::join(n.out().shape, ",")));
    }
  }
  if (f.inputs.empty()) throw Error("the fragment reads no tensor from outside");
  if (static_cast<int>(f.inputs.size()) > kRowwiseMaxInputs)
    throw Error(fmt::format("the fragment reads {} outside tensors; the row-wise ABI takes at most {}", f.inputs.size(), kRowwiseMaxInputs));
  // Connected: walking edges inside the fragment from the output reaches every node.
  std::set<std::string> reached = {f.output};
  std::vector<std::string> stack = {f.output};
  while (!stack.empty()) {
    std::string cur = stack.back();
    stack.pop_back();
    std::vector<std::string> next = ir::referenced_names(graph.at(cur));
    for (const auto& u : graph.users(cur)) next.push_back(u);
    for (const auto& m : next)
      if (inside.count(m) && reached.insert(m).second) stack.push_back(m);
  }
  if (reached.size() != inside.size()) throw Error("the fragment's nodes are not connected; propose one chain at a time");
  return f;
}

std::vector<RowwiseFragment> rowwise_candidates(const discover::Plan& plan) {
  std::set<std::string> covered;
  for (const auto& e : plan.entries)
    if (e.match.rule != kGeneratedRowwiseRule) covered.insert(e.match.nodes.begin(), e.match.nodes.end());
  std::set<std::string> free;
  for (const auto& n : plan.graph.nodes) {
    if (n.kind == ir::NodeKind::Op && rowwise_category(n.category) && !covered.count(n.name)) free.insert(n.name);
  }
  std::vector<RowwiseFragment> out;
  std::set<std::string> done;
  for (const auto& n : plan.graph.nodes) {
    if (!free.count(n.name) || done.count(n.name)) continue;
    std::vector<std::string> group, stack = {n.name};
    done.insert(n.name);
    while (!stack.empty()) {
      std::string cur = stack.back();
      stack.pop_back();
      group.push_back(cur);
      std::vector<std::string> next = ir::referenced_names(plan.graph.at(cur));
      for (const auto& u : plan.graph.users(cur)) next.push_back(u);
      for (const auto& m : next)
        if (free.count(m) && done.insert(m).second) stack.push_back(m);
    }
    if (group.size() < 2) continue;  // one op alone gains nothing from fusion
    try {
      RowwiseFragment f = make_rowwise_fragment(plan.graph, group, covered);
      // Strided rows, groups, channel, window, bool and per-row inputs: generated only, outside the agent's ABI.
      bool plain = f.inner == 1 && f.groups == 1 && std::all_of(f.channels.begin(), f.channels.end(), [](int64_t c) { return c == 0; }) &&
                   std::none_of(f.window.begin(), f.window.end(), [](bool w) { return w; }) &&
                   std::none_of(f.boolean.begin(), f.boolean.end(), [](bool b) { return b; }) &&
                   std::none_of(f.per_row.begin(), f.per_row.end(), [](bool b) { return b; });
      if (plain) out.push_back(std::move(f));
    } catch (const Error&) {
      // Not a row-wise chain as a whole; the LLM may still propose a part of it.
    }
  }
  return out;
}

json fragment_rule(const ir::Graph& graph, const RowwiseFragment& f, const std::string& name, const std::string& arch,
                   const std::string& description) {
  std::map<std::string, std::string> var;
  for (size_t i = 0; i < f.inputs.size(); ++i) var[f.inputs[i]] = fmt::format("$in{}", i);
  std::set<std::string> inside(f.nodes.begin(), f.nodes.end());
  auto arg = [&](const json& a, auto&& self) -> json {
    if (ir::is_ref(a)) {
      const std::string& r = ir::ref_name(a);
      if (inside.count(r)) return r;
      if (var.count(r)) return var.at(r);
      throw Error(fmt::format("fragment argument '{}' is neither inside nor a listed input", r));
    }
    if (a.is_array() && std::any_of(a.begin(), a.end(), [](const json& e) { return ir::is_ref(e); })) {
      json out = json::array();
      for (const auto& e : a) out.push_back(self(e, self));
      return out;
    }
    return pattern_literal(a);
  };
  json nodes = json::array();
  for (const auto& name_ : f.nodes) {
    const ir::Node& n = graph.at(name_);
    json args = json::array();
    for (const auto& a : n.args) args.push_back(arg(a, arg));
    json node = {{"id", n.name}, {"op", n.op}, {"args", args}};
    if (!n.kwargs.empty()) {
      json kw = json::object();
      for (const auto& [k, v] : n.kwargs.items()) kw[k] = arg(v, arg);
      node["kwargs"] = kw;
    }
    nodes.push_back(node);
  }
  json constraints = json::array();
  // The kernel was verified at this row length; other lengths need a new verification.
  constraints.push_back(fmt::format("cols == {}", f.cols));
  json operands = json::object();
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    std::string v = var.at(f.inputs[i]);
    operands[fmt::format("in{}", i)] = v;
    constraints.push_back(f.broadcast[i] ? fmt::format("{}.rank == 1 and numel({}) == cols", v, v)
                                         : fmt::format("numel({}) == rows * cols and {}.shape[-1] == cols", v, v));
  }
  return {{"name", name},
          {"description", description},
          {"family", "rowwise"},
          {"dtypes", {f.dtype}},
          {"archs", {arch}},
          {"priority", 0},
          {"pattern", {{"nodes", nodes}, {"output", f.output}}},
          {"dims", {{"cols", fmt::format("@{}.shape[-1]", f.output)}, {"rows", fmt::format("numel(@{}) // cols", f.output)}}},
          {"constraints", constraints},
          {"kernel", {{"family", "rowwise"}, {"kind", "generated"}, {"abi", "FactRowwiseArgs"}, {"registry_entry", name},
                      {"operands", operands}}}};
}

json fragment_to_json(const ir::Graph& graph, const RowwiseFragment& f) {
  json nodes = json::array(), inputs = json::array();
  for (const auto& n : f.nodes) nodes.push_back(node_json(graph.at(n)));
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    json in = {{"name", f.inputs[i]}, {"shape", graph.at(f.inputs[i]).out().shape}, {"broadcast", f.broadcast[i]}};
    if (f.channels[i]) in["channel"] = {{"channels", f.channels[i]}, {"inner", f.channel_inner}};
    if (f.window[i]) in["window"] = true;
    if (f.boolean[i]) in["dtype"] = "bool";  // absent for the fragment's dtype: earlier fragments keep their ids
    if (f.index[i]) in["dtype"] = "int64";
    if (f.per_row[i]) in["per_row"] = true;  // absent otherwise, likewise
    inputs.push_back(in);
  }
  json j = {{"format", "fact-rowwise-fragment"}, {"version", 1}, {"nodes", nodes}, {"inputs", inputs},
            {"output", f.output}, {"rows", f.rows}, {"cols", f.cols}, {"dtype", f.dtype},
            {"full_shape", f.full_shape}, {"trailing_dims", f.trailing_dims}};
  if (f.groups > 1) j["groups"] = f.groups;  // absent otherwise, as below
  if (f.inner_dims > 0) {  // absent for contiguous rows: their fragments (and kernel ids) stay as they were
    j["inner_dims"] = f.inner_dims;
    j["inner"] = f.inner;
  }
  return j;
}

}  // namespace fact::discover
