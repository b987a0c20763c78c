#include "realize/families/gemm/epilogue_sm90_evt.h"

#include <fmt/format.h>

#include "core/error.h"
#include "realize/families/gemm/epilogue_activations.h"

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

std::string functor(const EpilogueTree& t, bool fp32_accurate) {
  if (is_multiply_add(t)) return "cutlass::homogeneous_multiply_add";
  if (t.kind == Kind::binary) return cutlass_functor(t.op);
  const ActivationEntry& a = activation_entry(t.name);
  return fp32_accurate && !a.fp32_accurate.empty() ? a.fp32_accurate : a.cutlass;
}

std::string type_of(const EpilogueTree& t, bool fp32_accurate, int depth) {
  switch (t.kind) {
    case Kind::acc: return "fusion::Sm90AccFetch";
    case Kind::scalar: return "fusion::Sm90ScalarBroadcast<ElementCompute, ScalarStride>";
    case Kind::source: return "fusion::Sm90SrcFetch<ElementC>";
    case Kind::row_broadcast:
      return "fusion::Sm90RowBroadcast<0, TileShape, ElementBias, ElementCompute, RowStride, kAlignmentBias>";
    case Kind::col_broadcast:
      return "fusion::Sm90ColBroadcast<0, TileShape, ElementBias, ElementCompute, ColStride, kAlignmentBias>";
    case Kind::activation:
    case Kind::binary: break;
  }
  // The root writes D; inner nodes keep the compute type, as CUTLASS's LinCombPerColBiasEltAct does.
  std::string out = fmt::format("fusion::Sm90EVT<fusion::Sm90Compute<{}, {}, ElementCompute, kRound>,  // {}",
                                functor(t, fp32_accurate), depth == 0 ? "ElementD" : "ElementCompute", t.text());
  auto ops = operands(t);
  for (size_t i = 0; i < ops.size(); ++i)
    out += "\n" + pad(depth) + type_of(*ops[i], fp32_accurate, depth + 1) + (i + 1 < ops.size() ? "," : ">");
  return out;
}

std::string arguments_of(const EpilogueTree& t, int depth) {
  switch (t.kind) {
    case Kind::acc:
    case Kind::source: return fmt::format("{{}}  /* {} */", t.text());
    case Kind::scalar: {
      std::string v = t.name == "alpha" ? "a.alpha" : t.name == "beta" ? "beta" : fmt::format("{}", t.value);
      return fmt::format("{{ {{ElementCompute({})}}, {{nullptr}}, {{ScalarStride{{}}}} }}  /* {} */", v, t.text());
    }
    case Kind::row_broadcast:
      return fmt::format("{{ static_cast<const ElementBias*>(a.{}), ElementBias(0), RowStride{{}} }}", t.name);
    case Kind::col_broadcast:
      return fmt::format("{{ static_cast<const ElementBias*>(a.{}), ElementBias(0), ColStride{{}} }}", t.name);
    case Kind::activation:
    case Kind::binary: break;
  }
  // An Sm90EVT's arguments: each operand's, then the operation's own (empty for these functors).
  std::string out = "{  // " + t.text();
  for (const EpilogueTree* op : operands(t)) out += "\n" + pad(depth) + arguments_of(*op, depth + 1) + ",";
  return out + "\n" + pad(depth) + "{} }";
}

}  // namespace

std::optional<std::string> sm90_evt_rejection(const EpilogueTree& tree) {
  if (tree.kind != Kind::activation && tree.kind != Kind::binary)
    return fmt::format("epilogue tree {} is a leaf: an sm90 epilogue visitor tree computes at its root", tree.text());
  if (tree.reads_source("C") && tree.reads_source("residual"))
    return fmt::format("epilogue tree {} reads C and the residual: both ride in the epilogue's one source load",
                       tree.text());
  bool row = tree.any([](const EpilogueTree& t) { return t.kind == Kind::row_broadcast; });
  bool col = tree.any([](const EpilogueTree& t) { return t.kind == Kind::col_broadcast; });
  if (row && col)
    return fmt::format("epilogue tree {} reads bias as a row and as a column vector: the kernel has one vector slot",
                       tree.text());
  return std::nullopt;
}

std::string sm90_evt_type(const EpilogueTree& tree, bool fp32_accurate) {
  if (auto why = sm90_evt_rejection(tree)) throw Error(*why);
  return type_of(tree, fp32_accurate, 0);
}

std::string sm90_evt_arguments(const EpilogueTree& tree) {
  if (auto why = sm90_evt_rejection(tree)) throw Error(*why);
  return arguments_of(tree, 0);
}

}  // namespace fact::realize
