// The normalization problem: from a rule match (rows folded over a contiguous last dim, which operands are
// bound, whether the sum is read) and its JSON.
#include <array>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "core/enum_names.h"
#include "realize/families/normalization/family.h"
#include "realize/family_json.h"
#include "realize/kernel_family.h"

namespace fact::realize {
namespace {

constexpr EnumNames<NormKind, 2> kKinds{{{NormKind::layer_norm, "layer_norm"}, {NormKind::rms_norm, "rms_norm"}}};

// Row stride of a tensor whose leading dims fold into rows over a contiguous last dim, or -1.
int64_t folded_row_stride(const ir::TensorMeta& t) {
  if (t.rank() == 0) return -1;
  int64_t last = t.rank() - 1;
  if (t.strides[last] != 1 && t.shape[last] != 1) return -1;
  if (t.rank() == 1) return t.shape[0];
  for (int64_t i = 0; i + 2 < t.rank(); ++i)
    if (t.shape[i] != 1 && t.strides[i] != t.strides[i + 1] * t.shape[i + 1]) return -1;
  return t.strides[last - 1];
}

// torch.finfo(dtype).eps: what aten.rms_norm uses when eps is None.
double finfo_eps(Element e) {
  switch (e) {
    case Element::bf16: return 0.0078125;
    case Element::f16: return 0.0009765625;
    default: return static_cast<double>(std::numeric_limits<float>::epsilon());
  }
}

}  // namespace

std::string to_string(NormKind k) { return enum_name(kKinds, k); }
NormKind norm_kind_from_string(const std::string& s) { return parse_enum(kKinds, s, "normalization kind"); }
void to_json(nlohmann::json& j, NormKind k) { j = to_string(k); }
void from_json(const nlohmann::json& j, NormKind& k) { k = norm_kind_from_string(j.get<std::string>()); }

Numerics NormProblem::numerics() const {
  return element == Element::bf16 ? Numerics::bf16 : element == Element::f16 ? Numerics::fp16 : Numerics::fp32;
}

int NormProblem::max_vector_elems() const {
  int64_t g = std::gcd(cols, x_row_stride);
  if (has_residual) g = std::gcd(g, residual_row_stride);
  int max = 16 / element_bytes(element), v = 1;
  while (v * 2 <= max && g % (v * 2) == 0) v *= 2;
  return v;
}

void NormProblem::validate() const {
  if (rows <= 0 || cols <= 0)
    throw Error(fmt::format("{} problem {} x {}: rows and cols must be positive", to_string(kind), rows, cols));
  if (x_row_stride < cols)
    throw Error(fmt::format("{} problem: x row stride {} is below cols {}; rows would overlap (call .contiguous())",
                            to_string(kind), x_row_stride, cols));
  if (has_residual && residual_row_stride < cols)
    throw Error(fmt::format("{} problem: residual row stride {} is below cols {}", to_string(kind),
                            residual_row_stride, cols));
  if (store_sum && !has_residual)
    throw Error(to_string(kind) + " problem: store_sum needs a residual (the sum is x + residual)");
  if (kind == NormKind::rms_norm && has_bias)
    throw Error("rms_norm problem: RMSNorm has no bias; drop it or use layer_norm");
  if (!(eps >= 0))
    throw Error(fmt::format("{} problem: eps {} must be >= 0", to_string(kind), eps));
}

nlohmann::json NormProblem::to_json() const {
  return {{"kind", to_string(kind)}, {"rows", rows}, {"cols", cols}, {"x_row_stride", x_row_stride},
          {"residual_row_stride", residual_row_stride}, {"has_weight", has_weight}, {"has_bias", has_bias},
          {"has_residual", has_residual}, {"store_sum", store_sum}, {"eps", eps},
          {"element", to_string(element)}, {"numerics", to_string(numerics())}, {"arch", to_string(arch)}};
}

NormProblem NormProblem::from_json(const nlohmann::json& j) {
  return parse_family_json("normalization problem", "NormProblem::to_json", [&] {
    NormProblem p;
    p.kind = norm_kind_from_string(j.at("kind"));
    p.rows = j.at("rows");
    p.cols = j.at("cols");
    p.x_row_stride = j.value("x_row_stride", p.cols);
    p.residual_row_stride = j.value("residual_row_stride", int64_t{0});
    p.has_weight = j.value("has_weight", false);
    p.has_bias = j.value("has_bias", false);
    p.has_residual = j.value("has_residual", false);
    p.store_sum = j.value("store_sum", false);
    p.eps = j.at("eps");
    p.element = element_from_string(j.at("element"));
    p.arch = arch_from_string(j.at("arch"));
    return p;
  });
}

NormProblem norm_problem_from_match(const discover::Match& m, const ir::Graph& g, Numerics numerics, Arch arch) {
  std::string what = fmt::format("pattern {} at node '{}'", m.rule, m.anchor);
  const nlohmann::json ops = m.kernel.value("operands", nlohmann::json::object());
  NormProblem p;
  try {
    p.kind = norm_kind_from_string(m.kernel.value("kind", ""));
  } catch (const Error& e) {
    throw Error(what + ": the rule's kernel.kind: " + e.what());
  }
  const ir::Node* x = bound_node(m, g, ops.value("x", nlohmann::json()));
  if (!x || x->outputs.empty()) throw Error(what + ": the rule's kernel block names no bound tensor for operand x");
  auto dim = [&](const char* k) {
    auto it = m.dims.find(k);
    if (it == m.dims.end()) throw Error(fmt::format("{}: the rule gives no dim {}", what, k));
    return it->second;
  };
  p.rows = dim("rows");
  p.cols = dim("cols");
  p.x_row_stride = folded_row_stride(x->out());
  if (p.x_row_stride < 0)
    throw Error(what + ": x's leading dims do not fold into rows over a contiguous last dim; PyTorch keeps it");
  const ir::Node* residual = bound_node(m, g, ops.value("residual", nlohmann::json()));
  if (residual) {
    p.has_residual = true;
    p.residual_row_stride = folded_row_stride(residual->out());
    if (p.residual_row_stride < 0)
      throw Error(what + ": the residual's leading dims do not fold into rows; PyTorch keeps it");
    // The op takes x and residual of one shape and dtype (no broadcast, no type promotion inside the kernel).
    if (residual->out().shape != x->out().shape || residual->out().dtype != x->out().dtype)
      throw Error(what + ": the residual is not shaped and typed like x (a broadcast or mixed-dtype add); PyTorch "
                         "keeps it");
  }
  // The sum x + residual is written only when the graph reads it outside the match (the rule's extra output
  // that kernel.outputs names "sum").
  const nlohmann::json outs = m.kernel.value("outputs", nlohmann::json::object());
  for (const auto& [id, node] : m.extra_outputs) {
    if (outs.value("sum", nlohmann::json()) != id)
      throw Error(fmt::format("{}: the graph reads pattern node '{}' (node '{}') outside the match, but the rule's "
                              "kernel.outputs maps no normalization output (sum) to it", what, id, node));
    p.store_sum = true;
  }
  // The op reads x, weight and bias in one dtype and writes the result in it (computing in fp32 inside, which is
  // what Hugging Face's RMSNorm spells with casts around the norm); other mixes stay PyTorch's.
  const std::string& x_dtype = x->out().dtype;
  const ir::Node& anchor = g.at(m.anchor);
  if (!anchor.outputs.empty() && anchor.out().dtype != x_dtype)
    throw Error(fmt::format("{}: the result is {} but x is {}; PyTorch keeps the mixed-dtype norm", what,
                            anchor.out().dtype, x_dtype));
  const ir::Node* weight = bound_node(m, g, ops.value("weight", nlohmann::json()));
  const ir::Node* bias = bound_node(m, g, ops.value("bias", nlohmann::json()));
  for (auto [operand, t] : {std::pair{"weight", weight}, std::pair{"bias", bias}})
    if (t && !t->outputs.empty() && t->out().dtype != x_dtype)
      throw Error(fmt::format("{}: the {} is {} but x is {}; PyTorch keeps the mixed-dtype norm", what, operand,
                              t->out().dtype, x_dtype));
  p.has_weight = weight != nullptr;
  p.has_bias = bias != nullptr;
  p.element = input_element(numerics);
  p.arch = arch;
  auto eps = m.attrs.find("eps");
  p.eps = eps == m.attrs.end() || eps->second.is_null() ? (p.kind == NormKind::layer_norm ? 1e-5 : finfo_eps(p.element))
                                                        : eps->second.get<double>();
  p.validate();
  return p;
}

}  // namespace fact::realize
