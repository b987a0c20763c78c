#include "realize/families/gemm/epilogue_sm90_evt.h"

#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "realize/families/gemm/epilogue_activations.h"
#include "realize/families/gemm/epilogue_scalar.h"

namespace fact::realize {
namespace {

using Kind = EpilogueNodeKind;

std::string pad(int depth) { return std::string(2 * (depth + 1), ' '); }

// add(mul(x, y), z): CUTLASS computes it as one fused multiply-add, homogeneous_multiply_add(x, y, z).
bool is_multiply_add(const EpilogueTree& t) {
  return t.kind == Kind::binary && t.op == BinaryOp::add && t.children[0].kind == Kind::binary &&
         t.children[0].op == BinaryOp::mul;
}

// The operands of an operation node, in the order its functor takes them.
std::vector<const EpilogueTree*> operands(const EpilogueTree& t) {
  if (is_multiply_add(t)) return {&t.children[0].children[0], &t.children[0].children[1], &t.children[1]};
  std::vector<const EpilogueTree*> out;
  for (const auto& c : t.children) out.push_back(&c);
  return out;
}

// Cap on a tree's nodes (the contract with discover's growth): the EVT type nests one level per node.
constexpr int kMaxNodes = 64;

std::string functor(const EpilogueTree& t, bool fp32_accurate) {
  if (is_multiply_add(t)) return "cutlass::homogeneous_multiply_add";
  if (t.kind == Kind::binary) return cutlass_functor(t.op);
  if (activation_needs_generated_functor(t)) return activation_functor_name(t);
  const ActivationEntry& a = activation_entry(t.name);
  return fp32_accurate && !a.fp32_accurate.empty() ? a.fp32_accurate : a.cutlass;
}

// The slot a vec<i> leaf reads, as a pointer of the vectors' element type.
std::string vector_pointer(const EpilogueTree& t) {
  int i = vector_slot_index(t.name);
  return i < 0 ? fmt::format("static_cast<const ElementBias*>(a.{})", t.name)
               : fmt::format("static_cast<const ElementBias*>(a.vectors[{}])", i);
}

// The broadcast a vector leaf is in the kernel: a row vector of the caller's D is a column vector of the transposed
// problem's D^T, and the other way round.
Kind kernel_kind(const EpilogueTree& t, bool transposed) {
  if (!transposed) return t.kind;
  return t.kind == Kind::row_broadcast ? Kind::col_broadcast : t.kind == Kind::col_broadcast ? Kind::row_broadcast : t.kind;
}

std::string type_of(const EpilogueTree& t, bool fp32_accurate, bool transposed, int depth) {
  switch (kernel_kind(t, transposed)) {
    case Kind::acc: return "fusion::Sm90AccFetch";
    case Kind::scalar: return "fusion::Sm90ScalarBroadcast<ElementCompute, ScalarStride>";
    case Kind::source: return "fusion::Sm90SrcFetch<ElementC>";
    case Kind::row_broadcast:
      return "fusion::Sm90RowBroadcast<0, TileShape, ElementBias, ElementCompute, RowStride, kAlignmentBias>";
    case Kind::col_broadcast:
      return "fusion::Sm90ColBroadcast<0, TileShape, ElementBias, ElementCompute, ColStride, kAlignmentBias>";
    // Read through its pointer in the vectors' (D's) type; Sm90Compute converts it to ElementCompute.
    case Kind::scalar_vector: return "fusion::Sm90ScalarBroadcast<ElementBias, ScalarStride>";
    case Kind::activation:
    case Kind::binary: break;
  }
  // The root writes D; inner nodes keep the compute type, as CUTLASS's LinCombPerColBiasEltAct does.
  std::string out = fmt::format("fusion::Sm90EVT<fusion::Sm90Compute<{}, {}, ElementCompute, kRound>,  // {}",
                                functor(t, fp32_accurate), depth == 0 ? "ElementD" : "ElementCompute", t.text());
  auto ops = operands(t);
  for (size_t i = 0; i < ops.size(); ++i)
    out += "\n" + pad(depth) + type_of(*ops[i], fp32_accurate, transposed, depth + 1) + (i + 1 < ops.size() ? "," : ">");
  return out;
}

std::string arguments_of(const EpilogueTree& t, bool transposed, int depth) {
  // A vec<i> column vector of the caller holds one value per row of every batch ([batch, M]); bias and row vectors
  // are shared by the batches.
  bool per_batch = t.kind == Kind::col_broadcast && vector_slot_index(t.name) >= 0;
  switch (kernel_kind(t, transposed)) {
    case Kind::acc:
    case Kind::source: return fmt::format("{{}}  /* {} */", t.text());
    case Kind::scalar: {
      std::string v = t.name == "alpha" ? "a.alpha" : t.name == "beta" ? "beta" : fmt::format("{}", t.value);
      return fmt::format("{{ {{ElementCompute({})}}, {{nullptr}}, {{ScalarStride{{}}}} }}  /* {} */", v, t.text());
    }
    case Kind::row_broadcast:
      if (per_batch)
        return fmt::format("{{ {}, ElementBias(0), RowStride{{cute::_0{{}}, cute::_1{{}}, a.m}} }}", vector_pointer(t));
      return fmt::format("{{ {}, ElementBias(0), RowStride{{}} }}", vector_pointer(t));
    case Kind::col_broadcast:
      if (per_batch)
        return fmt::format("{{ {}, ElementBias(0), ColStride{{cute::_1{{}}, cute::_0{{}}, a.m}} }}", vector_pointer(t));
      return fmt::format("{{ {}, ElementBias(0), ColStride{{}} }}", vector_pointer(t));
    case Kind::scalar_vector:
      return fmt::format("{{ {{ElementBias(0)}}, {{{}}}, {{ScalarStride{{}}}} }}  /* {} */", vector_pointer(t), t.text());
    case Kind::activation:
    case Kind::binary: break;
  }
  // An Sm90EVT's arguments: each operand's, then the operation's own (empty for these functors).
  std::string out = "{  // " + t.text();
  for (const EpilogueTree* op : operands(t)) out += "\n" + pad(depth) + arguments_of(*op, transposed, depth + 1) + ",";
  return out + "\n" + pad(depth) + "{} }";
}

}  // namespace

std::optional<std::string> sm90_evt_rejection(const EpilogueTree& tree) {
  if (tree.kind != Kind::activation && tree.kind != Kind::binary)
    return fmt::format("epilogue tree {} is a leaf: an sm90 epilogue visitor tree computes at its root", tree.text());
  if (tree.reads_source("C") && tree.reads_source("residual"))
    return fmt::format("epilogue tree {} reads C and the residual: both ride in the epilogue's one source load",
                       tree.text());
  if (tree.node_count() > kMaxNodes)
    return fmt::format("epilogue tree {} has {} nodes: sm90 epilogue visitor trees in FACT take at most {}",
                       tree.text(), tree.node_count(), kMaxNodes);
  // One slot is one tensor: read as a row vector, a column vector and a scalar it would need three shapes.
  std::map<std::string, Kind> slot_kind;
  std::optional<std::string> why;
  tree.any([&](const EpilogueTree& t) {
    if (t.kind != Kind::row_broadcast && t.kind != Kind::col_broadcast && t.kind != Kind::scalar_vector) return false;
    auto [it, fresh] = slot_kind.emplace(t.name, t.kind);
    if (!fresh && it->second != t.kind)
      why = fmt::format("epilogue tree {} reads slot {} as two kinds of broadcast (row, column, scalar): one slot "
                        "holds one tensor", tree.text(), t.name);
    return why.has_value();
  });
  return why;
}

std::string sm90_evt_type(const EpilogueTree& tree, bool fp32_accurate, bool transposed) {
  if (auto why = sm90_evt_rejection(tree)) throw Error(*why);
  return type_of(tree.with_exact_reciprocals(), fp32_accurate, transposed, 0);
}

std::string sm90_evt_arguments(const EpilogueTree& tree, bool transposed) {
  if (auto why = sm90_evt_rejection(tree)) throw Error(*why);
  return arguments_of(tree.with_exact_reciprocals(), transposed, 0);
}

std::string sm90_evt_functors(const EpilogueTree& tree) {
  return activation_scalar_functors(tree, /*all=*/false, /*cutlass_wrappers=*/true);
}

// The vec<i> slots the tree reads, in slot order, with the broadcast kind of each.
std::vector<std::pair<int, EpilogueNodeKind>> vector_slot_kinds(const EpilogueTree& tree) {
  std::vector<std::pair<int, EpilogueNodeKind>> out;
  for (int i : tree.vector_slots())
    tree.any([&](const EpilogueTree& t) {
      bool leaf = t.kind == EpilogueNodeKind::row_broadcast || t.kind == EpilogueNodeKind::col_broadcast ||
                  t.kind == EpilogueNodeKind::scalar_vector;
      if (leaf && vector_slot_index(t.name) == i) out.emplace_back(i, t.kind);
      return leaf && vector_slot_index(t.name) == i;
    });
  return out;
}

// can_implement's checks of the vec<i> slots the tree reads (sm90 templates' vector_checks; "" without any): each
// set, as a null slot would read as zeros; a row vector aligned for the broadcast's vector loads.
std::string sm90_vector_checks(const EpilogueTree& tree, bool transposed) {
  std::string out;
  for (const auto& [i, kind] : vector_slot_kinds(tree)) {
    out += fmt::format("  if (!a.vectors[{}]) return FACT_ERR_SHAPE;  // vec{}\n", i, i);
    if (kind == (transposed ? EpilogueNodeKind::col_broadcast : EpilogueNodeKind::row_broadcast))
      out += fmt::format("  if (!aligned(a.vectors[{}], kAlignmentBias, sizeof(ElementBias))) return FACT_ERR_SHAPE;\n", i);
  }
  return out;
}

}  // namespace fact::realize
