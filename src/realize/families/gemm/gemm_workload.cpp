#include "realize/families/gemm/gemm_workload.h"

#include <optional>
#include <string>

#include <fmt/format.h>

#include "core/error.h"

namespace fact::realize {
namespace {

// The graph node a rule operand variable ("$a") was bound to.
const ir::Node* bound_node(const discover::Match& m, const ir::Graph& g, const nlohmann::json& var) {
  if (!var.is_string()) return nullptr;
  std::string v = var.get<std::string>();
  auto it = m.inputs.find(v);
  if (it == m.inputs.end() && !v.empty() && v[0] == '$') it = m.inputs.find(v.substr(1));
  if (it == m.inputs.end() || it->second.empty()) return nullptr;
  return g.find(it->second);
}

// A tensor whose leading dims fold into the matrix rows: [d0, ..., rows, cols] packed above the last two dims.
bool leading_dims_fold(const ir::TensorMeta& t) {
  if (t.rank() <= 2) return true;
  for (int64_t i = 0; i + 2 < t.rank(); ++i)
    if (t.shape[i] != 1 && t.strides[i] != t.strides[i + 1] * t.shape[i + 1]) return false;
  return true;
}

// The matched pattern's epilogue: SwiGLU and the residual add are predefined trees; an activation wraps the
// bias tree (any activation of data/epilogues/activations.json, named when it is a predefined tree).
Epilogue epilogue_of(const discover::Match& m, bool bias, bool residual) {
  std::string act = m.kernel.value("activation", "");
  if (act == "silu_mul") return Epilogue::named("bias_silu_mul");
  if (residual) return Epilogue::named("bias_residual");
  if (!act.empty()) {
    try {
      return Epilogue::of(EpilogueTree::activation(act, Epilogue::named_tree("bias")));
    } catch (const Error& e) {
      throw Error(fmt::format("activation '{}' has no GEMM epilogue: {}", act, e.what()));
    }
  }
  return Epilogue::named(bias ? "bias" : "none");
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

Epilogue grown_epilogue(const discover::Match& m, const ir::Graph& g, const std::string& what, int64_t rows,
                        int64_t n, const ir::Node* bias, const ir::Node* residual, int channel_axis) {
  const nlohmann::json ops = m.kernel.value("operands", nlohmann::json::object());
  Epilogue e;
  try {
    e = Epilogue::of(EpilogueTree::from_json(m.kernel["epilogue_tree"]));
  } catch (const Error& err) {
    throw Error(fmt::format("{}: epilogue_tree: {}", what, err.what()));
  }
  if (e.tree.reads_source("C") || e.tree.any([](const EpilogueTree& t) { return t.name == "beta"; }))
    throw Error(fmt::format("{}: epilogue_tree {} reads C or beta; a grown tree starts from the rule's tree with "
                            "the beta*C term removed", what, e.tree.text()));
  // The value the tree computes: the anchor's, or, where a conv's kernel reduces it (ConvProblem::reduce), the value its
  // pool reads.
  const ir::Node& anchor = g.at(m.anchor);
  const bool pooled = m.kernel.contains("reduce") && !anchor.args.empty() && ir::is_ref(anchor.args[0]);
  const ir::TensorMeta& out = pooled ? g.at(ir::ref_name(anchor.args[0])).out() : anchor.out();
  auto check_dtype = [&](const ir::TensorMeta& t, const std::string& slot) {
    if (t.dtype != out.dtype)
      throw Error(fmt::format("{}: epilogue slot {} is {}, but the GEMM's output is {}; the epilogue reads its "
                              "tensors in the output's dtype", what, slot, t.dtype, out.dtype));
  };
  if (e.tree.reads_bias() != (bias != nullptr))
    throw Error(fmt::format("{}: epilogue_tree {} {} the bias slot, but the rule {} operand bias", what,
                            e.tree.text(), e.tree.reads_bias() ? "reads" : "does not read",
                            bias ? "binds" : "binds no"));
  if (has_residual(e) != (residual != nullptr))
    throw Error(fmt::format("{}: epilogue_tree {} {} the residual, but the match {} operand residual", what,
                            e.tree.text(), has_residual(e) ? "reads" : "does not read", residual ? "binds" : "binds no"));
  if (residual) {
    if (residual->out().shape != out.shape)
      throw Error(fmt::format("{}: epilogue slot residual is shaped {}, not like the output {}", what,
                              shape_text(residual->out().shape), shape_text(out.shape)));
    check_dtype(residual->out(), "residual");
  }
  std::optional<std::string> why;
  e.tree.any([&](const EpilogueTree& t) {
    if (vector_slot_index(t.name) < 0 || (t.kind != EpilogueNodeKind::row_broadcast &&
                                          t.kind != EpilogueNodeKind::col_broadcast &&
                                          t.kind != EpilogueNodeKind::scalar_vector))
      return false;
    const ir::Node* v = bound_node(m, g, ops.value(t.name, nlohmann::json()));
    if (!v || v->outputs.empty()) {
      why = fmt::format("{}: epilogue_tree reads {} but kernel.operands binds no tensor to \"{}\"", what, t.text(),
                        t.name);
      return true;
    }
    const ir::TensorMeta& vt = v->out();
    int64_t want = t.kind == EpilogueNodeKind::row_broadcast ? n : t.kind == EpilogueNodeKind::col_broadcast ? rows : 1;
    // Right-aligned against the output, the channel dim must hold the N values (a [N] bias, a conv's [N, 1, 1]);
    // or a flat [N] (BatchNorm's statistics of a conv's [n, N, ...] output, which growth read along the channels).
    int64_t axis = (channel_axis < 0 ? out.rank() + channel_axis : channel_axis) - (out.rank() - vt.rank());
    bool last_ok = t.kind == EpilogueNodeKind::scalar_vector || vt.rank() == 0 ||
                   (t.kind == EpilogueNodeKind::row_broadcast
                        ? (axis >= 0 && axis < vt.rank() && vt.shape[axis] == n) || (vt.rank() == 1 && vt.shape[0] == n)
                        : vt.shape.back() == 1);
    if (vt.numel() != want || !last_ok) {
      why = fmt::format("{}: epilogue slot {} ({}) is shaped {}; it needs {} value{} ({})", what, t.name, t.text(),
                        shape_text(vt.shape), want, want == 1 ? "" : "s",
                        t.kind == EpilogueNodeKind::row_broadcast   ? "one per output column, e.g. [N] or [1, N]"
                        : t.kind == EpilogueNodeKind::col_broadcast ? "one per output row, shaped [..., rows, 1]"
                                                                    : "a one-element tensor");
      return true;
    }
    check_dtype(vt, t.name);
    return false;
  });
  if (why) throw Error(*why);
  return e;
}

GemmProblem gemm_problem_from_match(const discover::Match& m, const ir::Graph& g, Numerics numerics, Arch arch) {
  std::string what = fmt::format("pattern {} at node '{}'", m.rule, m.anchor);
  const nlohmann::json ops = m.kernel.value("operands", nlohmann::json::object());
  const ir::Node* a = bound_node(m, g, ops.value("a", nlohmann::json()));
  const ir::Node* b = bound_node(m, g, ops.value("b", nlohmann::json()));
  if (!a || !b || a->outputs.empty() || b->outputs.empty())
    throw Error(what + ": the rule's kernel block names no bound tensors for operands a and b");
  const ir::Node* bias = bound_node(m, g, ops.value("bias", nlohmann::json()));
  const ir::Node* residual = bound_node(m, g, ops.value("residual", nlohmann::json()));
  // SwiGLU: the up projection (weight up_b, bias up_bias) runs first and its result U rides in the
  // residual slot; it must be a GEMM of the same A with a weight shaped and laid out like b.
  const ir::Node* up_b = bound_node(m, g, ops.value("up_b", nlohmann::json()));
  if (m.kernel.value("activation", "") == "silu_mul") {
    if (!up_b || up_b->outputs.empty())
      throw Error(what + ": activation silu_mul needs the up-projection weight as kernel operand up_b; fix the rule");
    if (up_b->out().shape != b->out().shape || up_b->out().strides != b->out().strides)
      throw Error(what + ": the up-projection weight is not shaped and strided like the gate weight");
  }

  auto dim = [&](const char* k) -> int64_t {
    auto it = m.dims.find(k);
    if (it == m.dims.end()) throw Error(fmt::format("{}: the rule gives no dim {}", what, k));
    return it->second;
  };
  GemmProblem p;
  p.m = dim("M");
  p.n = dim("N");
  p.k = dim("K");
  p.batch = m.dims.count("batch") ? dim("batch") : 1;
  p.numerics = numerics;
  p.arch = arch;
  p.element_in = input_element(numerics);
  p.element_out = p.element_in;
  p.epilogue = m.kernel.contains("epilogue_tree")
                   ? grown_epilogue(m, g, what, p.batch * p.m, p.n, bias, residual)
                   : epilogue_of(m, bias != nullptr, residual != nullptr);

  // A: [..., M, K] (leading dims fold into M, or form the batch of a batched GEMM).
  ir::TensorMeta ta = a->out();
  if (p.batch == 1) {
    if (!leading_dims_fold(ta)) throw Error(what + ": operand a's leading dims are not packed, so they cannot fold into M");
    ta.shape = {p.m, p.k};
    ta.strides = {a->out().strides[a->out().rank() - 2], a->out().strides.back()};
  } else if (ta.rank() > 3) {
    throw Error(what + ": batched operands of rank > 3 are not supported yet");
  }
  p.a = GemmProblem::operand_from_strides(ta.shape, ta.strides, "operand a of " + what);

  // B: [K, N] as stored, or [N, K] (a Linear weight: "nk") seen transposed.
  ir::TensorMeta tb = b->out();
  std::string b_layout = m.attrs.count("b_layout") ? m.attrs.at("b_layout").get<std::string>() : "kn";
  if (b_layout == "nk") {
    if (tb.rank() != 2) throw Error(what + ": a transposed (N x K) operand b must be 2-D");
    GemmOperand nk = GemmProblem::operand_from_strides(tb.shape, tb.strides, "operand b of " + what);
    p.b = {nk.layout == MatrixLayout::row ? MatrixLayout::column : MatrixLayout::row, nk.ld, 0};
  } else {
    if (tb.rank() > 3) throw Error(what + ": batched operands of rank > 3 are not supported yet");
    p.b = GemmProblem::operand_from_strides(tb.shape, tb.strides, "operand b of " + what);
  }
  p.b.constant = ir::is_module_state(g, *b);
  // D is allocated by FACT: packed row-major.
  p.d = {MatrixLayout::row, p.n, p.batch > 1 ? p.m * p.n : 0};
  p.validate();
  return p;
}

}  // namespace fact::realize
