// The attention problem: from a rule match (dims and scale from the rule, q/k/v and mask strides from the IR's views) and
// its JSON.
#include <array>
#include <cmath>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "core/enum_names.h"
#include "core/error.h"
#include "realize/families/attention/family.h"
#include "realize/family_json.h"
#include "realize/kernel_family.h"

namespace fact::realize {
namespace {

// The three inputs by name; their strides are "<name>_strides" in the problem's JSON.
constexpr std::array<std::pair<const char*, HeadStrides AttentionProblem::*>, 3> kTensors{
    {{"q", &AttentionProblem::q}, {"k", &AttentionProblem::k}, {"v", &AttentionProblem::v}}};

constexpr EnumNames<AttentionMask, 3> kMasks{{{AttentionMask::none, "none"},
                                              {AttentionMask::boolean, "bool"},
                                              {AttentionMask::additive, "additive"}}};

// The mask's kind and [batch, head, row] strides once broadcast to [batch, heads, seq_q, seq_k], as SDPA
// broadcasts attn_mask (right-aligned; a dim of 1 repeats with stride 0). The op wrapper expands the runtime
// tensor the same way, so these are the strides the kernel reads with.
std::pair<AttentionMask, HeadStrides> mask_of(const ir::Node& n, const AttentionProblem& p, const std::string& what) {
  const auto& t = n.out();
  // An additive mask is q's dtype in the module; the op casts it to the dtype its kernel computes in.
  AttentionMask kind = t.dtype == "bool" ? AttentionMask::boolean : AttentionMask::additive;
  if (kind == AttentionMask::additive && t.dtype != "float32" && t.dtype != "bfloat16" && t.dtype != "float16")
    throw Error(fmt::format("{}: the attention mask is {}; SDPA takes a bool or floating mask", what, t.dtype));
  if (t.rank() < 1 || t.rank() > 4)
    throw Error(fmt::format("{}: the attention mask is {}-D; it must broadcast to [batch, heads, seq_q, seq_k]", what,
                            t.rank()));
  const std::array<int64_t, 4> full{p.batch, p.heads, p.seq_q, p.seq_k};
  std::array<int64_t, 4> strides{};
  for (int d = 0; d < 4; ++d) {
    int src = d - (4 - int(t.rank()));
    if (src < 0) continue;
    if (t.shape[src] == full[d]) strides[d] = full[d] == 1 ? 0 : t.strides[src];
    else if (t.shape[src] != 1)
      throw Error(fmt::format("{}: the attention mask's dim {} is {}, which does not broadcast to {}", what, src,
                              t.shape[src], full[d]));
  }
  if (strides[3] != 1 && p.seq_k > 1)
    throw Error(fmt::format("{}: the attention mask's keys have stride {}, not 1; PyTorch keeps it", what, strides[3]));
  return {kind, HeadStrides{strides[0], strides[1], strides[2]}};
}

}  // namespace

std::string to_string(AttentionMask m) { return enum_name(kMasks, m); }

void AttentionProblem::validate() const {
  if (batch <= 0 || heads <= 0 || heads_kv <= 0 || seq_q <= 0 || seq_k <= 0 || head_dim <= 0)
    throw Error(fmt::format("attention problem b{} h{}/{} s{}x{} d{}: every extent must be positive", batch, heads,
                            heads_kv, seq_q, seq_k, head_dim));
  if (heads % heads_kv)
    throw Error(fmt::format("attention problem: heads_kv {} does not divide heads {}", heads_kv, heads));
  if (causal && seq_q != seq_k)
    throw Error(fmt::format("attention problem: causal with seq_q {} != seq_k {}: the module's mask alignment is "
                            "ambiguous there; PyTorch keeps it", seq_q, seq_k));
  if (!(scale > 0)) throw Error(fmt::format("attention problem: scale {} must be positive", scale));
  if (numerics != Numerics::tf32 && numerics != Numerics::x3tf32 && numerics != Numerics::bf16 &&
      numerics != Numerics::fp16)
    throw Error("attention problem: numerics " + to_string(numerics) +
                " has no attention kernel (tf32, 3xtf32, bf16 or fp16)");
  if (element != input_element(numerics))
    throw Error("attention problem: element " + to_string(element) + " does not go with numerics " + to_string(numerics));
  if (mask != AttentionMask::none && (mask_strides.batch < 0 || mask_strides.head < 0 || mask_strides.row < 0))
    throw Error("attention problem: mask_strides must be >= 0 (0 broadcasts)");
  for (auto [name, tensor] : kTensors)
    if ((this->*tensor).row < head_dim && seq_q > 1)
      throw Error(fmt::format("attention problem: {} row stride {} is below head_dim {}", name, (this->*tensor).row,
                              head_dim));
}

nlohmann::json AttentionProblem::to_json() const {
  nlohmann::json j = {{"batch", batch}, {"heads", heads}, {"heads_kv", heads_kv}, {"seq_q", seq_q}, {"seq_k", seq_k},
                      {"head_dim", head_dim}, {"causal", causal}, {"scale", scale}, {"element", to_string(element)},
                      {"numerics", to_string(numerics)}, {"arch", to_string(arch)}};
  for (auto [name, tensor] : kTensors) j[std::string(name) + "_strides"] = strides_json(this->*tensor);
  if (mask != AttentionMask::none) j["mask"] = to_string(mask), j["mask_strides"] = strides_json(mask_strides);
  return j;
}

AttentionProblem AttentionProblem::from_json(const nlohmann::json& j) {
  return parse_family_json("attention problem", "AttentionProblem::to_json", [&] {
    AttentionProblem p;
    p.batch = j.at("batch"); p.heads = j.at("heads"); p.heads_kv = j.at("heads_kv");
    p.seq_q = j.at("seq_q"); p.seq_k = j.at("seq_k"); p.head_dim = j.at("head_dim");
    p.causal = j.at("causal"); p.scale = j.at("scale");
    for (auto [name, tensor] : kTensors) p.*tensor = strides_from_json(j.at(std::string(name) + "_strides"));
    p.element = element_from_string(j.at("element"));
    p.numerics = numerics_from_string(j.at("numerics"));
    p.arch = arch_from_string(j.at("arch"));
    if (j.contains("mask")) {
      p.mask = parse_enum(kMasks, j.at("mask").get<std::string>(), "attention mask");
      if (p.mask != AttentionMask::none) p.mask_strides = strides_from_json(j.at("mask_strides"));
    }
    return p;
  });
}

AttentionProblem attention_problem_from_match(const discover::Match& m, const ir::Graph& g, Numerics numerics,
                                              Arch arch) {
  std::string what = fmt::format("pattern {} at node '{}'", m.rule, m.anchor);
  const nlohmann::json ops = m.kernel.value("operands", nlohmann::json::object());
  auto dim = [&](const char* key) {
    auto it = m.dims.find(key);
    if (it == m.dims.end()) throw Error(fmt::format("{}: the rule gives no dim {}", what, key));
    return it->second;
  };
  AttentionProblem p;
  p.batch = dim("batch"); p.heads = dim("heads"); p.heads_kv = dim("heads_kv");
  p.seq_q = dim("seq_q"); p.seq_k = dim("seq_k"); p.head_dim = dim("head_dim");
  if (m.dims.count("head_dim_v") && dim("head_dim_v") != p.head_dim)
    throw Error(fmt::format("{}: V's head dim {} differs from Q's {}; the kernel takes equal head dims", what,
                            dim("head_dim_v"), p.head_dim));
  p.causal = m.dims.count("causal") && dim("causal") != 0;
  auto scale = m.attrs.find("scale");
  p.scale = scale == m.attrs.end() || scale->second.is_null() ? 1.0 / std::sqrt(double(p.head_dim))
                                                              : scale->second.get<double>();
  auto strides = [&](const char* name) {
    const ir::Node* n = bound_node(m, g, ops.value(name, nlohmann::json()));
    if (!n || n->outputs.empty()) throw Error(fmt::format("{}: the rule's kernel block names no tensor for {}", what, name));
    const auto& t = n->out();
    if (t.rank() != 4) throw Error(fmt::format("{}: {} is {}-D; the kernel takes [batch, heads, seq, head_dim]", what, name, t.rank()));
    if (t.strides[3] != 1 && t.shape[3] != 1)
      throw Error(fmt::format("{}: {}'s head dim has stride {}, not 1; PyTorch keeps it", what, name, t.strides[3]));
    return HeadStrides{t.strides[0], t.strides[1], t.strides[2]};
  };
  p.q = strides("q"); p.k = strides("k"); p.v = strides("v");
  p.arch = arch;
  // fp32 asks for fp32 accuracy: the kernel's 3xTF32 mode gives it (it is verified to fp32's error).
  p.numerics = numerics == Numerics::fp32 ? Numerics::x3tf32 : numerics;
  p.element = input_element(p.numerics);
  if (const ir::Node* mask = bound_node(m, g, ops.value("mask", nlohmann::json())))
    std::tie(p.mask, p.mask_strides) = mask_of(*mask, p, what);
  p.validate();
  return p;
}

}  // namespace fact::realize
