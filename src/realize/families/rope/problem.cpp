// The rope problem: from a rule match (x's view strides, the cos/sin tables, the output layout) and its JSON.
#include <algorithm>
#include <array>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "realize/families/rope/family.h"
#include "realize/family_json.h"
#include "realize/kernel_family.h"

namespace fact::realize {
namespace {

// The four tensors by name; their strides are "<name>_strides" in the problem's JSON.
constexpr std::array<std::pair<const char*, HeadStrides RopeProblem::*>, 4> kTensors{
    {{"x", &RopeProblem::x}, {"cos", &RopeProblem::cos}, {"sin", &RopeProblem::sin}, {"out", &RopeProblem::out}}};

}  // namespace

Numerics RopeProblem::numerics() const {
  return element == Element::bf16 ? Numerics::bf16 : element == Element::f16 ? Numerics::fp16 : Numerics::fp32;
}

int RopeProblem::max_vector_elems() const {
  int64_t g = head_dim / 2;
  for (auto [name, tensor] : kTensors)
    for (int64_t v : {(this->*tensor).batch, (this->*tensor).head, (this->*tensor).row}) g = std::gcd(g, v);  // gcd(g, 0) = g: a broadcast dim allows any
  int max = 16 / element_bytes(element), v = 1;
  while (v * 2 <= max && g % (v * 2) == 0) v *= 2;
  return v;
}

void RopeProblem::validate() const {
  if (batch <= 0 || heads <= 0 || seq <= 0 || head_dim <= 0)
    throw Error(fmt::format("rope problem b{} h{} s{} d{}: every extent must be positive", batch, heads, seq, head_dim));
  if (head_dim % 2)
    throw Error(fmt::format("rope problem: head_dim {} is odd; rotate_half splits the last dim in two halves", head_dim));
  for (auto [name, tensor] : kTensors)
    if (const HeadStrides& s = this->*tensor; s.batch < 0 || s.head < 0 || s.row < 0)
      throw Error(fmt::format("rope problem: {} has a negative stride ({}, {}, {}); PyTorch keeps it", name, s.batch,
                              s.head, s.row));
  if (seq > 1 && (x.row < head_dim || out.row < head_dim))
    throw Error(fmt::format("rope problem: x row stride {} / out row stride {} is below head_dim {}; rows would "
                            "overlap", x.row, out.row, head_dim));
}

nlohmann::json RopeProblem::to_json() const {
  nlohmann::json j = {{"batch", batch}, {"heads", heads}, {"seq", seq}, {"head_dim", head_dim},
                      {"element", to_string(element)}, {"numerics", to_string(numerics())}, {"arch", to_string(arch)}};
  for (auto [name, tensor] : kTensors) j[std::string(name) + "_strides"] = strides_json(this->*tensor);
  return j;
}

RopeProblem RopeProblem::from_json(const nlohmann::json& j) {
  return parse_family_json("rope problem", "RopeProblem::to_json", [&] {
    RopeProblem p;
    p.batch = j.at("batch"); p.heads = j.at("heads"); p.seq = j.at("seq"); p.head_dim = j.at("head_dim");
    for (auto [name, tensor] : kTensors) p.*tensor = strides_from_json(j.at(std::string(name) + "_strides"));
    p.element = element_from_string(j.at("element"));
    p.arch = arch_from_string(j.at("arch"));
    return p;
  });
}

HeadStrides dense_strides_like(const HeadStrides& x, int64_t batch, int64_t heads, int64_t seq, int64_t head_dim) {
  // Outermost first: larger x stride first, ties (size-1 dims) in batch, head, row order.
  std::array<int, 3> order{0, 1, 2};
  const std::array<int64_t, 3> stride{x.batch, x.head, x.row}, extent{batch, heads, seq};
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return stride[a] > stride[b]; });
  std::array<int64_t, 3> dense{};
  int64_t next = head_dim;
  for (int i = 2; i >= 0; --i) {
    dense[order[i]] = next;
    next *= extent[order[i]];
  }
  return {dense[0], dense[1], dense[2]};
}

RopeProblem rope_problem_from_match(const discover::Match& m, const ir::Graph& g, Numerics numerics, Arch arch) {
  std::string what = fmt::format("pattern {} at node '{}'", m.rule, m.anchor);
  const nlohmann::json ops = m.kernel.value("operands", nlohmann::json::object());
  if (m.kernel.value("kind", "") != "half_split")
    throw Error(what + ": the rule's kernel.kind must be \"half_split\" (the only rotate_half form the kernel computes)");
  auto tensor = [&](const char* name) -> const ir::TensorMeta& {
    const ir::Node* n = bound_node(m, g, ops.value(name, nlohmann::json()));
    if (!n || n->outputs.empty())
      throw Error(fmt::format("{}: the rule's kernel block names no bound tensor for operand {}", what, name));
    return n->out();
  };
  const ir::TensorMeta& x = tensor("x");
  const ir::TensorMeta& anchor = g.at(m.anchor).out();

  RopeProblem p;
  if (x.rank() != 3 && x.rank() != 4)
    throw Error(fmt::format("{}: x is {}-D; the kernel takes [batch, heads, seq, head_dim] or [batch, seq, head_dim]",
                            what, x.rank()));
  const bool one_head = x.rank() == 3;
  p.batch = x.shape[0];
  p.heads = one_head ? 1 : x.shape[1];
  p.seq = x.shape[x.rank() - 2];
  p.head_dim = x.shape[x.rank() - 1];
  if (x.strides.back() != 1 && p.head_dim != 1)
    throw Error(fmt::format("{}: x's last dim has stride {}, not 1; PyTorch keeps it", what, x.strides.back()));
  p.x = {x.strides[0], one_head ? 0 : x.strides[1], x.strides[x.rank() - 2]};

  // A table [seq, D] or [1, 1, seq, D] broadcasts over batch and heads: stride 0 there.
  auto table = [&](const char* name) {
    const ir::TensorMeta& t = tensor(name);
    bool leading_ones = t.rank() == 2 || (t.rank() == 4 && t.shape[0] == 1 && t.shape[1] == 1);
    if (!leading_ones || t.shape[t.rank() - 1] != p.head_dim || t.shape[t.rank() - 2] != p.seq)
      throw Error(fmt::format("{}: {} must be [seq, head_dim] or [1, 1, seq, head_dim] = [{}, {}]", what, name, p.seq,
                              p.head_dim));
    if (t.strides.back() != 1)
      throw Error(fmt::format("{}: {}'s last dim has stride {}, not 1; PyTorch keeps it", what, name, t.strides.back()));
    if (t.dtype != x.dtype) throw Error(fmt::format("{}: {} is {} but x is {}; PyTorch keeps the mixed-dtype rotary",
                                                    what, name, t.dtype, x.dtype));
    return HeadStrides{0, 0, t.strides[t.rank() - 2]};
  };
  p.cos = table("cos");
  p.sin = table("sin");
  if (anchor.dtype != x.dtype)
    throw Error(fmt::format("{}: the result is {} but x is {}; PyTorch keeps the type-promoting rotary", what,
                            anchor.dtype, x.dtype));
  p.out = dense_strides_like(p.x, p.batch, p.heads, p.seq, p.head_dim);
  p.element = input_element(numerics);
  p.arch = arch;
  p.validate();
  return p;
}

}  // namespace fact::realize
