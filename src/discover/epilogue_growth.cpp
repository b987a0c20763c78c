#include "discover/epilogue_growth.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "discover/pointwise_expr.h"
#include "discover/row_program.h"
#include "ir/op_table.h"

namespace fact::discover {
using nlohmann::json;
namespace {

constexpr const char* kNamedFile = "epilogues/named.json";

const json& named_epilogues() {
  static const json named = [] {
    json j = read_json_file(data_dir() / kNamedFile, "named epilogues");
    if (!j.contains("epilogues") || !j["epilogues"].is_object())
      throw Error(fmt::format("{}: expected an object \"epilogues\" of name -> tree", (data_dir() / kNamedFile).string()));
    return j["epilogues"];
  }();
  return named;
}

bool is_binary(const json& t) {
  static const std::set<std::string> ops = {"add", "sub", "mul", "div", "max", "min"};
  return t.is_array() && !t.empty() && t[0].is_string() && ops.count(t[0].get<std::string>());
}

// The operand subtrees of an inner node: two for a binary op, one for an activation (its params are no node).
std::vector<size_t> child_positions(const json& t) {
  if (!t.is_array()) return {};
  return is_binary(t) ? std::vector<size_t>{1, 2} : std::vector<size_t>{1};
}

int tree_size(const json& t) {
  int n = 1;
  for (size_t i : child_positions(t)) n += tree_size(t[i]);
  return n;
}

bool is_beta_c(const json& t) { return t == json::array({"mul", "beta", "C"}); }

// Drops the beta * C addend: a grown epilogue never reads C (the contract).
json without_beta_c(const json& t) {
  if (!t.is_array()) return t;
  if (is_binary(t) && t[0] == "add") {
    if (is_beta_c(t[1])) return without_beta_c(t[2]);
    if (is_beta_c(t[2])) return without_beta_c(t[1]);
  }
  json out = t;
  for (size_t i : child_positions(t)) out[i] = without_beta_c(t[i]);
  return out;
}

std::string shape_text(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// The graph node a kernel operand variable ("$bias") is bound to, "" when unbound.
std::string bound(const Match& m, const char* operand) {
  const json ops = m.kernel.value("operands", json::object());
  if (!ops.contains(operand) || !ops[operand].is_string()) return "";
  auto it = m.inputs.find(ops[operand].get<std::string>());
  return it == m.inputs.end() ? "" : it->second;
}

// Why a node that reads the region cannot join it, when the op table does not list it.
std::string unlisted_reason(const ir::Node& n) {
  switch (n.category) {
    case ir::OpCategory::Reduction:
    case ir::OpCategory::Softmax:
    case ir::OpCategory::Normalization: return "a reduction (row-wise kernel)";
    case ir::OpCategory::View: return "a view/reshape";
    case ir::OpCategory::Gemm:
    case ir::OpCategory::Attention: return "a matrix product";
    default: return "not a pointwise op of data/ir/pointwise_ops.json";
  }
}

// Temporary leaves name the graph tensor ("@p_scale"); finish() numbers the slots the kept tree reads.
// `channel_axis`: the output dim that is the kernel's N (-1, the last, for a GEMM; 1 for a channels-first convolution,
// whose other dims flatten into rows in another order, so it takes no column vectors).
json external_leaf(const ir::Graph& g, const json& ref, const ir::TensorMeta& out, const std::string& bias_node,
                   int64_t channel_axis) {
  const std::string& name = ir::ref_name(ref);
  if (ref.contains("index") && ref["index"] != 0) throw NotPointwise(fmt::format("it reads output {} of '{}'", ref["index"].dump(), name));
  const ir::Node& n = g.at(name);
  if (n.outputs.empty()) throw NotPointwise(fmt::format("its operand '{}' is not a tensor", name));
  const ir::TensorMeta& t = n.outputs[0];
  if (t.dtype != out.dtype)
    throw NotPointwise(fmt::format("its operand '{}' is {}, not the output's {}", name, t.dtype, out.dtype));
  if (!t.is_contiguous()) throw NotPointwise(fmt::format("its operand '{}' is not contiguous", name));
  if (t.rank() > out.rank()) throw NotPointwise(fmt::format("its operand '{}' {} has more dims than the output", name, shape_text(t.shape)));
  if (ref.contains("channel_dim")) {  // a [C] vector along that dim (BatchNorm over [n, c, ...])
    int64_t dim = ref["channel_dim"].get<int64_t>(), axis = channel_axis < 0 ? channel_axis + out.rank() : channel_axis;
    if (t.rank() != 1 || dim != axis || t.shape[0] != out.shape[dim])
      throw NotPointwise(fmt::format("its operand '{}' {} runs along dim {} of the output {}, which is not the "
                                     "kernel's N", name, shape_text(t.shape), dim, shape_text(out.shape)));
    return name == bias_node ? json{{"row", "bias"}} : json{{"row", "@" + name}};
  }
  if (t.numel() == 1) return {{"scalar", "@" + name}};
  // Right-aligned against the output, missing leading dims read as 1.
  std::vector<int64_t> s(out.rank() - t.rank(), 1);
  s.insert(s.end(), t.shape.begin(), t.shape.end());
  if (s == out.shape) return {{"residual", "@" + name}};
  int64_t r = out.rank();
  if (channel_axis < 0) channel_axis += r;
  bool row = true;
  for (int64_t i = 0; i < r; ++i) row = row && s[i] == (i == channel_axis ? out.shape[i] : 1);
  if (row) return name == bias_node ? json{{"row", "bias"}} : json{{"row", "@" + name}};
  bool col = channel_axis == r - 1 && r >= 2 && s[r - 1] == 1 && std::equal(s.begin(), s.end() - 1, out.shape.begin());
  if (col) return {{"col", "@" + name}};
  throw NotPointwise(fmt::format("its operand '{}' {} broadcasts over the output {} as neither a row, a column, a "
                                 "scalar nor a residual", name, shape_text(t.shape), shape_text(out.shape)));
}

// Graph tensors read by temporary leaves, by kind ("row", "col", "scalar" -> vectors; "residual").
void collect_tensors(const json& t, std::vector<std::string>& vectors, std::vector<std::string>& residuals) {
  if (t.is_object()) {
    for (const auto& [kind, v] : t.items()) {
      std::string s = v.get<std::string>();
      if (s.empty() || s[0] != '@') continue;
      auto& list = kind == "residual" ? residuals : vectors;
      if (std::find(list.begin(), list.end(), s.substr(1)) == list.end()) list.push_back(s.substr(1));
    }
  }
  for (size_t i : child_positions(t)) collect_tensors(t[i], vectors, residuals);
}

json with_slots(const json& t, const std::map<std::string, std::string>& slot) {
  if (t.is_object() && t.size() == 1) {
    auto [kind, v] = *t.items().begin();
    std::string s = v.get<std::string>();
    if (!s.empty() && s[0] == '@') return kind == "residual" ? json("residual") : json{{kind, slot.at(s.substr(1))}};
    return t;
  }
  json out = t;
  for (size_t i : child_positions(t)) out[i] = with_slots(t[i], slot);
  return out;
}

// A view of one region value that keeps the elements' order (data/ir/aten_ops.json "reshape") and rows of the
// GEMM's N: its output is the GEMM's values under another shape.
bool same_rows_reshape(const ir::Node& n, const ir::TensorMeta& gemm, const std::set<std::string>& region) {
  const ir::OpInfo* info = ir::OpTable::builtin().find(n.op);
  if (!info || !info->reshape || n.outputs.size() != 1 || n.args.empty() || !ir::is_ref(n.args[0])) return false;
  const ir::TensorMeta& o = n.outputs[0];
  return region.count(ir::ref_name(n.args[0])) && o.dtype == gemm.dtype && o.numel() == gemm.numel() &&
         !o.shape.empty() && o.shape.back() == gemm.shape.back();
}

struct Growth {
  std::set<std::string> region;       // covered nodes
  std::map<std::string, json> tree;   // region value -> its expression
  std::vector<std::string> grown;     // nodes taken over, graph order
  std::string live_out;
};

int count_live_outs(const ir::Graph& g, const std::set<std::string>& region, std::string* last) {
  int n = 0;
  for (const auto& name : region) {
    const auto& users = g.users(name);
    if (std::any_of(users.begin(), users.end(), [&](const std::string& u) { return !region.count(u); })) {
      ++n;
      *last = name;
    }
  }
  return n;
}

// The kept growth as the match's new fields (the contract in epilogue_growth.h).
void finish(Match& m, const ir::Graph& g, const Growth& kept) {
  const json& tree = kept.tree.at(kept.live_out);
  std::vector<std::string> vectors, residuals;
  collect_tensors(tree, vectors, residuals);
  std::map<std::string, std::string> slot;
  json& operands = m.kernel["operands"];
  for (size_t i = 0; i < vectors.size(); ++i) {
    std::string s = fmt::format("vec{}", i);
    slot[vectors[i]] = s;
    operands[s] = "$" + s;
    m.inputs["$" + s] = vectors[i];
  }
  if (!residuals.empty()) {
    operands["residual"] = "$residual";
    m.inputs["$residual"] = residuals.front();
  }
  m.kernel["epilogue_tree"] = with_slots(tree, slot);
  m.kernel["epilogue_grown_over"] = kept.grown;
  m.nodes.assign(kept.region.begin(), kept.region.end());
  std::sort(m.nodes.begin(), m.nodes.end(), [&](const auto& a, const auto& b) { return g.index_of(a) < g.index_of(b); });
  m.anchor = kept.live_out;
  m.dtype = g.at(kept.live_out).out().dtype;
}

// A reduction a convolution's kernel computes in place of writing its output (ConvProblem::reduce / reduce_over).
struct ConvReduction {
  std::string op, over;  // "sum" / "mean" over "pixels"; "sum" / "mean" / "max" / "min" over "channels"
};

// The reduction node n makes of the convolution region's live-out, where the live-out has no other reader and the
// kernel can compute it (fp32, groups 1): a sum or mean over all its pixels (dims 2..: a global average pool), or a
// sum, mean, max or min over its channels (dim 1); {} otherwise.
ConvReduction conv_reduction(const Match& m, const ir::Graph& g, const ir::Node& n, const std::string& live_out) {
  const std::string form = row_reduction_form(n.op);
  if (n.args.empty() || !ir::is_ref(n.args[0]) || ir::ref_name(n.args[0]) != live_out) return {};
  if (g.users(live_out).size() != 1 || n.outputs.size() != 1) return {};
  if (n.kwargs.contains("dtype") && !n.kwargs["dtype"].is_null()) return {};
  auto groups = m.attrs.find("groups");
  if (groups != m.attrs.end() && groups->second.is_number_integer() && groups->second.get<int64_t>() != 1) return {};
  const ir::TensorMeta& in = g.at(live_out).out();
  if (in.dtype != "float32" || n.out().dtype != "float32" || in.rank() < 3) return {};
  // What the conv kernel's store node computes, by reduce_over (data/families/conv.json "reductions").
  static const json reductions =
      read_json_file(data_dir() / "families" / "conv.json", "kernel family file").at("reductions");
  auto kernel_takes = [&](const char* over) {
    const auto& ops = reductions.at(over);
    return std::find(ops.begin(), ops.end(), form) != ops.end();
  };
  try {
    const int rank = static_cast<int>(in.rank());
    ReducedDims d = row_reduction_dims(n.name, n.op, n.args, n.kwargs, rank);
    if (d.groups != 1) return {};
    if (d.first == 2 && d.count == rank - 2 && kernel_takes("pixels")) return {form, "pixels"};
    if (d.first == 1 && d.count == 1 && kernel_takes("channels")) return {form, "channels"};
  } catch (const Error&) {
  }
  return {};
}

// Grows one match; returns the plan note ("" when there is nothing to say).
std::string grow(Match& m, const ir::Graph& g, const std::map<std::string, std::string>& covered_by) {
  json start = starting_epilogue_tree(m);
  if (start.is_null()) return "";
  const ir::TensorMeta& out = g.at(m.anchor).out();
  const std::string bias_node = bound(m, "bias");
  const bool conv = m.family == "conv";
  const int64_t channel_axis = conv ? 1 : -1;  // -1: the last dim of whatever shape the region value has
  Growth state;
  state.region.insert(m.nodes.begin(), m.nodes.end());
  state.tree[m.anchor] = start;
  state.live_out = m.anchor;
  Growth kept = state;
  std::string stop_node, stop_reason;

  for (size_t i = g.index_of(m.anchor) + 1; i < g.nodes.size() && stop_node.empty(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (n.kind != ir::NodeKind::Op) continue;
    auto refs = ir::referenced_names(n);
    if (std::none_of(refs.begin(), refs.end(), [&](const std::string& r) { return state.region.count(r); })) continue;
    // Scanning in graph order and stopping at the first reader that cannot join keeps every external operand
    // independent of the region: a path from the region to it would pass through such a reader first.
    try {
      auto other = covered_by.find(n.name);
      std::string covered = other == covered_by.end() ? "" : "pattern " + other->second + " covers it";
      if (!covered.empty() && is_listed_pointwise(n)) throw NotPointwise(covered);
      // A reshape of a region value that keeps the rows of N (x.view(B, T, N) after addmm, as Hugging Face's
      // Conv1D writes a Linear): the same values in the same order, so the expression passes through it. Kept
      // only with a pointwise op after it: a view alone is no work for the epilogue.
      if (covered.empty() && !conv && same_rows_reshape(n, out, state.region)) {
        state.region.insert(n.name);
        state.tree[n.name] = state.tree.at(ir::ref_name(n.args.at(0)));
        state.grown.push_back(n.name);
        continue;
      }
      if (!is_listed_pointwise(n)) throw NotPointwise(unlisted_reason(n) + (covered.empty() ? "" : ", and " + covered));
      // The values the node reads from the region have its shape: the GEMM's, or a reshape of it with rows of N.
      const ir::TensorMeta* here = n.outputs.size() == 1 ? &n.outputs[0] : nullptr;
      bool same_shape = here && here->numel() == out.numel() && here->shape.back() == out.shape.back() &&
                        std::all_of(refs.begin(), refs.end(), [&](const std::string& r) {
                          return !state.region.count(r) || g.at(r).out().shape == here->shape;
                        });
      if (!same_shape)
        throw NotPointwise(fmt::format("a shape-changing broadcast (output {} vs the GEMM's {})",
                                       n.outputs.empty() ? "none" : shape_text(n.outputs[0].shape), shape_text(out.shape)));
      if (here->dtype != out.dtype)
        throw NotPointwise(fmt::format("its output is {}, not the GEMM's {}", here->dtype, out.dtype));
      json t = pointwise_tree(n, [&](const json& ref) -> json {
        const std::string& r = ir::ref_name(ref);
        if (state.region.count(r)) return state.tree.at(r);  // a value used twice appears twice (recomputed)
        return external_leaf(g, ref, *here, bias_node, channel_axis);
      });
      if (tree_size(t) > kMaxEpilogueTreeNodes)
        throw NotPointwise(fmt::format("the epilogue tree would exceed {} nodes", kMaxEpilogueTreeNodes));
      std::vector<std::string> vectors, residuals;
      collect_tensors(t, vectors, residuals);
      if (static_cast<int>(vectors.size()) > kMaxEpilogueVectors)
        throw NotPointwise(fmt::format("more than {} vector operands", kMaxEpilogueVectors));
      if (residuals.size() > 1) throw NotPointwise("a second residual tensor");
      // A kernel whose rule says it reads no residual (a transposed convolution's strided phases) stops before one,
      // so that the ops from there on stay free for another pattern.
      if (!residuals.empty() && !m.kernel.value("reads_residual", true))
        throw NotPointwise("the " + m.rule + " kernel reads no residual tensor");
      state.region.insert(n.name);
      state.tree[n.name] = std::move(t);
      state.grown.push_back(n.name);
      if (count_live_outs(g, state.region, &state.live_out) == 1) kept = state;
    } catch (const NotPointwise& e) {
      stop_node = n.name;
      stop_reason = fmt::format("stops at {} ({}): {}", n.name, n.op, e.what());
    }
  }
  // A convolution's value reduced next over its pixels (a global average pool) or its channels (amin over dim 1): the
  // kernel reduces it in its epilogue and never writes the output, the chain's largest tensor.
  ConvReduction reduce = conv && !stop_node.empty() ? conv_reduction(m, g, g.at(stop_node), kept.live_out) : ConvReduction{};
  if (!reduce.op.empty()) {
    kept.region.insert(stop_node);
    kept.tree[stop_node] = kept.tree.at(kept.live_out);
    kept.grown.push_back(stop_node);
    kept.live_out = stop_node;
    m.kernel["reduce"] = reduce.op;
    m.kernel["reduce_over"] = reduce.over;
  }
  if (!kept.grown.empty()) finish(m, g, kept);
  if (!reduce.op.empty())
    return fmt::format("{} at {}: epilogue grown over {} ({} op{}); {} ({}) reduces ({}) {} in the kernel's epilogue, "
                       "so the convolution's output is never written", m.rule, m.nodes.front(),
                       fmt::join(kept.grown, ", "), kept.grown.size(), kept.grown.size() == 1 ? "" : "s", stop_node,
                       g.at(stop_node).op, reduce.op,
                       reduce.over == "pixels" ? "each image's pixels" : "each pixel's channels");

  const ir::Node* stop = stop_node.empty() ? nullptr : &g.at(stop_node);
  // A GEMM whose value goes straight into a view or another matrix product (attention heads, an MLP's next
  // layer) ends where it should: not worth a note.
  bool boundary = stop && (stop->category == ir::OpCategory::View || stop->category == ir::OpCategory::Gemm ||
                           stop->category == ir::OpCategory::Attention || stop->op == "getitem");
  if (!stop || (kept.grown.empty() && boundary)) return "";
  std::string what = kept.grown.empty() ? "epilogue not grown"
                                        : fmt::format("epilogue grown over {} ({} op{})", fmt::join(kept.grown, ", "),
                                                      kept.grown.size(), kept.grown.size() == 1 ? "" : "s");
  return fmt::format("{} at {}: {}; {}", m.rule, m.nodes.front(), what, stop_reason);
}

}  // namespace

json starting_epilogue_tree(const Match& m) {
  const json& k = m.kernel;
  if ((m.family != "gemm" && m.family != "conv") || k.contains("epilogue_tree") || !m.extra_outputs.empty())
    return nullptr;
  std::string act = k.value("activation", "");
  // SwiGLU reads the up projection and the residual rule its residual in the residual slot: not grown.
  if (act == "silu_mul" || !bound(m, "residual").empty()) return nullptr;
  json t = without_beta_c(named_epilogues().at(bound(m, "bias").empty() ? "none" : "bias"));
  return act.empty() ? t : activation_tree(act, std::move(t));
}

void grow_gemm_epilogues(std::vector<Match>& matches, const ir::Graph& graph, std::vector<std::string>* notes) {
  std::map<std::string, std::string> covered_by;  // node -> rule of the match covering it
  for (const auto& m : matches)
    for (const auto& n : m.nodes) covered_by[n] = m.rule;
  for (auto& m : matches) {
    std::map<std::string, std::string> others = covered_by;
    for (const auto& n : m.nodes) others.erase(n);
    std::string note = grow(m, graph, others);
    for (const auto& n : m.nodes) covered_by[n] = m.rule;
    if (!note.empty() && notes) notes->push_back(std::move(note));
  }
}

}  // namespace fact::discover
