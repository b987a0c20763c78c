#include "realize/families/gemm/epilogue_sm80.h"

#include <fmt/format.h>

#include "core/error.h"
#include "realize/families/gemm/epilogue_activations.h"

namespace fact::realize {
namespace {

// The sub-trees the 2.x epilogues compute, in canonical text.
constexpr const char* kScaled = "mul(alpha,acc)";
constexpr const char* kScaledBias = "add(mul(alpha,acc),row(bias))";

// An optional activation at the top of the tree: its name ("" for none) and its operand.
std::pair<std::string, const EpilogueTree*> strip_activation(const EpilogueTree& t) {
  if (t.kind == EpilogueNodeKind::activation) return {t.name, &t.children[0]};
  return {"", &t};
}

std::string activation_functor(const std::string& act, bool fp32_accurate) {
  const ActivationEntry& a = activation_entry(act);
  return fp32_accurate && !a.fp32_accurate.empty() ? a.fp32_accurate : a.cutlass;
}

std::optional<Sm80Epilogue> match(const EpilogueTree& tree, bool fp32_accurate) {
  Sm80Epilogue e;
  // universal: [act](add(mul(beta, C), X)), X = alpha * acc [+ bias]
  auto [act, body] = strip_activation(tree);
  if (body->kind == EpilogueNodeKind::binary && body->op == BinaryOp::add &&
      body->children[0].text() == "mul(beta,C)" &&
      (body->children[1].text() == kScaled || body->children[1].text() == kScaledBias)) {
    e.activation = act;
    if (act.empty()) {
      e.output_op = "cutlass::epilogue::thread::LinearCombination";
    } else {
      const ActivationEntry& a = activation_entry(act);
      // CUTLASS's alias where it has one; LinearCombinationWith (the sm80 template) builds the others.
      e.output_op = (fp32_accurate && !a.fp32_accurate.empty()) || a.cutlass2_output_op.empty()
                        ? fmt::format("LinearCombinationWith<{}>::Op", activation_functor(act, fp32_accurate))
                        : a.cutlass2_output_op;
    }
    return e;
  }
  // broadcast: combine([act](alpha * acc + bias), residual), combine add or mul
  if (tree.kind == EpilogueNodeKind::binary && (tree.op == BinaryOp::add || tree.op == BinaryOp::mul) &&
      tree.children[1].text() == "residual") {
    auto [inner_act, inner] = strip_activation(tree.children[0]);
    if (inner->text() != kScaledBias) return std::nullopt;
    e.broadcast = true;
    e.activation = inner_act;
    e.activation_op = inner_act.empty() ? "cutlass::epilogue::thread::Identity"
                                        : activation_functor(inner_act, fp32_accurate);
    e.combine_op = tree.op == BinaryOp::add ? "cutlass::plus" : "cutlass::multiplies";
    return e;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> sm80_epilogue_rejection(const EpilogueTree& tree) {
  // Grown trees (vec<i> slots, run-time scalars, activations without a CUTLASS functor or with params) have no
  // 2.x LinearCombination* form: they stay PyTorch's on sm80, and the reason names what has none.
  if (!tree.vector_slots().empty())
    return fmt::format("epilogue tree {} reads vec<i> slots: CUTLASS 2.x epilogues in FACT take one bias vector; it "
                       "stays PyTorch's on sm80", tree.text());
  std::optional<std::string> why;
  tree.any([&](const EpilogueTree& t) {
    if (t.kind != EpilogueNodeKind::activation) return false;
    if (activation_entry(t.name).cutlass.empty() || !t.params.empty())
      why = fmt::format("epilogue tree {}: activation {} has no CUTLASS functor{} for the 2.x epilogues; it stays "
                        "PyTorch's on sm80", tree.text(), t.name, t.params.empty() ? "" : " taking params");
    return why.has_value();
  });
  if (why) return why;
  if (match(tree, false)) return std::nullopt;
  return fmt::format("epilogue tree {} has no CUTLASS 2.x form in FACT yet (sm80 renders [act](beta*C + alpha*acc "
                     "[+ bias]) and [act](alpha*acc + bias) + or * residual); it stays PyTorch's on sm80",
                     tree.text());
}

Sm80Epilogue sm80_epilogue(const EpilogueTree& tree, bool fp32_accurate) {
  if (auto why = sm80_epilogue_rejection(tree)) throw Error(*why);
  if (auto e = match(tree, fp32_accurate)) return *e;
  throw Error(*sm80_epilogue_rejection(tree));
}

}  // namespace fact::realize
