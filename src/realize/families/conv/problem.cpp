// The conv problem: from a rule match (x and w as the graph has them, the attrs, the grown epilogue) and its JSON.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "discover/epilogue_growth.h"
#include "realize/families/conv/family.h"
#include "realize/families/gemm/epilogue_sm90_evt.h"
#include "realize/families/gemm/gemm_workload.h"
#include "realize/family_json.h"
#include "realize/kernel_family.h"

namespace fact::realize {
namespace {

// An attr list (stride [2, 2], or one value [2] for every dim) as the ABI's (d, h, w); `fill`, the attr's default,
// stands for a dim the convolution does not have and for an attr the call leaves out.
ConvDims spatial_attr(const discover::Match& m, const char* name, int dims, int64_t fill, const std::string& what) {
  ConvDims out;
  out.fill(fill);
  auto it = m.attrs.find(name);
  if (it == m.attrs.end() || it->second.is_null()) return out;
  std::vector<int64_t> v;
  try {
    v = it->second.is_array() ? it->second.get<std::vector<int64_t>>() : std::vector<int64_t>{it->second.get<int64_t>()};
  } catch (const nlohmann::json::exception&) {
    throw Error(fmt::format("{}: attr {} is {}, not a list of integers (padding='same' is not taken yet)", what, name,
                            it->second.dump()));
  }
  if (v.size() != 1 && static_cast<int>(v.size()) != dims)
    throw Error(fmt::format("{}: attr {} has {} values for a {}-D convolution", what, name, v.size(), dims));
  for (int i = 0; i < dims; ++i) out[kConvSpatial - dims + i] = v.size() == 1 ? v[0] : v[i];
  return out;
}

std::string dims_text(const ConvDims& d) { return fmt::format("{}", fmt::join(d, "x")); }

// channels rounded up to whole 16-byte vectors of the element (TMA's unit).
int64_t whole_vectors(int64_t channels, Element element) {
  int64_t vec = 16 / element_bytes(element);
  return (channels + vec - 1) / vec * vec;
}

}  // namespace

Numerics ConvProblem::numerics() const {
  if (element == Element::bf16) return Numerics::bf16;
  if (element == Element::f16) return Numerics::fp16;
  return direct() ? Numerics::fp32 : x3tf32 ? Numerics::x3tf32 : Numerics::tf32;
}

int64_t ConvProblem::kernel_channels(bool fold) const { return fold ? folded_c() : padded_c() * (x3tf32 ? 3 : 1); }

int64_t ConvProblem::padded_c() const { return whole_vectors(c, element); }

int64_t ConvProblem::folded_c() const { return whole_vectors(filter[2] * c, element); }

bool ConvProblem::can_fold_width() const {
  const nlohmann::json axes = family_data("conv").at("config_space");
  std::vector<int> widths = axes.at("k_tile_bytes");
  return !direct() && !transposed && !x3tf32 && filter[2] > 1 &&
         padded_c() * element_bytes(element) < *std::max_element(widths.begin(), widths.end());
}

std::vector<int64_t> ConvProblem::result_shape() const {
  std::vector<int64_t> s = {n, reduce_over == "channels" ? 1 : k};
  if (reduce_over != "pixels")
    for (int i = kConvSpatial - spatial_dims; i < kConvSpatial; ++i) s.push_back(out[i]);
  return s;
}

int64_t ConvProblem::expected_out(int i) const {
  if (transposed) return (in[i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (filter[i] - 1) + output_padding[i] + 1;
  return (in[i] + 2 * padding[i] - dilation[i] * (filter[i] - 1) - 1) / stride[i] + 1;
}

int64_t ConvProblem::gemm_k() const {
  int64_t k = direct() ? c / groups : padded_c();
  for (int i = 0; i < kConvSpatial; ++i) k *= transposed ? (filter[i] + stride[i] - 1) / stride[i] : filter[i];
  return k;
}

std::vector<ConvPhase> conv_transposed_phases(const ConvProblem& p, int i) {
  const int64_t s = p.stride[i], d = p.dilation[i], pad = p.padding[i], r = p.filter[i];
  auto floor_div = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  if (std::gcd(s, d) != 1)
    throw Error(fmt::format("conv problem: a transposed convolution of stride {} and dilation {} (dim {}): their common "
                            "factor leaves outputs that only the bias reaches; PyTorch keeps it", s, d, i));
  std::vector<ConvPhase> phases;
  for (int64_t res = 0; res < s; ++res) {
    ConvPhase ph;
    ph.residue = res;
    while ((ph.first * d) % s != res) ++ph.first;
    const int64_t q_min = floor_div(pad - res + s - 1, s), q_max = floor_div(p.out[i] - 1 + pad - res, s);
    ph.outputs = q_max - q_min + 1;
    if (ph.outputs <= 0) continue;
    if (ph.first >= r)
      throw Error(fmt::format("conv problem: transposed convolution with filter {} and stride {} (dim {}): outputs "
                              "{} mod {} take no tap (the bias alone); PyTorch keeps it", r, s, i, res, s));
    ph.taps = (r - ph.first + s - 1) / s;
    ph.lower = (ph.first * d - res) / s + (ph.taps - 1) * d - q_min;
    ph.upper = ph.outputs - p.in[i] - ph.lower + (ph.taps - 1) * d;
    ph.offset = s * q_min + res - pad;
    if (ph.lower < 0 || ph.upper < 0)
      throw Error(fmt::format("conv problem: transposed convolution, dim {}: padding {} crops the outputs {} mod {} "
                              "past x's edge (a forward window starting inside x); PyTorch keeps it", i, pad, res, s));
    phases.push_back(ph);
  }
  return phases;
}

void ConvProblem::validate() const {
  if (spatial_dims < 1 || spatial_dims > kConvSpatial)
    throw Error(fmt::format("conv problem: {} spatial dims; FACT takes conv1d, conv2d and conv3d", spatial_dims));
  if (n <= 0 || c <= 0 || k <= 0)
    throw Error(fmt::format("conv problem n={} c={} k={}: every extent must be positive", n, c, k));
  if (groups <= 0 || c % groups || k % groups)
    throw Error(fmt::format("conv problem c={} k={} groups={}: groups must divide both channel counts", c, k, groups));
  if (dense_direct && (groups != 1 || transposed || !reduce.empty() || channels_last || x3tf32))
    throw Error("conv problem: dense_direct is for a forward convolution of groups 1, off a chain of convolutions, "
                "neither reducing nor 3xTF32");
  if (groups > 1 && transposed)
    throw Error(fmt::format("conv problem: a transposed convolution of {} groups (FACT's transposed convolutions take "
                            "groups 1); PyTorch keeps it", groups));
  for (int i = 0; i < kConvSpatial; ++i) {
    if (in[i] <= 0 || filter[i] <= 0 || stride[i] <= 0 || dilation[i] <= 0 || padding[i] < 0)
      throw Error(fmt::format("conv problem: input {}, filter {}, stride {}, dilation {} must be positive and padding "
                              "{} at least 0", dims_text(in), dims_text(filter), dims_text(stride), dims_text(dilation),
                              dims_text(padding)));
    if (i < kConvSpatial - spatial_dims && (in[i] != 1 || filter[i] != 1 || stride[i] != 1 || padding[i] != 0))
      throw Error(fmt::format("conv problem: a {}-D convolution has extent 1, stride 1 and padding 0 in dim {}",
                              spatial_dims, i));
    if (output_padding[i] < 0 || (output_padding[i] > 0 && (!transposed || output_padding[i] >= std::max(stride[i], dilation[i]))))
      throw Error(fmt::format("conv problem: output padding {} must be 0, or below the stride or the dilation of a "
                              "transposed convolution", dims_text(output_padding)));
    if (out[i] != expected_out(i) || out[i] <= 0)
      throw Error(fmt::format("conv problem: output {} does not follow from input {}, filter {}, stride {}, padding "
                              "{}, dilation {}{}", dims_text(out), dims_text(in), dims_text(filter), dims_text(stride),
                              dims_text(padding), dims_text(dilation),
                              transposed ? ", output padding " + dims_text(output_padding) + " (transposed)" : ""));
    if (transposed) conv_transposed_phases(*this, i);  // throws when a phase is no forward convolution
  }
  if (x3tf32 && (element != Element::f32 || direct()))
    throw Error("conv problem: 3xTF32 is for fp32 convolutions of groups 1 (a grouped one's direct kernel multiplies in "
                "fp32 already)");
  const nlohmann::json reductions = family_data("conv").at("reductions");
  auto reduction_known = [&] {
    if (!reductions.contains(reduce_over)) return false;
    const auto& ops = reductions.at(reduce_over);
    return std::find(ops.begin(), ops.end(), reduce) != ops.end();
  };
  if (!reduce.empty() && (!reduction_known() || element != Element::f32 || direct()))
    throw Error(fmt::format("conv problem: reduce '{}' over '{}': an fp32 implicit-GEMM convolution of groups 1 sums or "
                            "averages its pixels (\"pixels\") or sums, averages, maxes or mins its channels "
                            "(\"channels\")", reduce, reduce_over));
  if (reduce.empty() != reduce_over.empty())
    throw Error("conv problem: reduce and reduce_over are set together");
  if (transposed && epilogue.tree.reads_source("residual"))
    throw Error("conv problem: a transposed convolution's epilogue reads a residual; its phases write strided output "
                "pixels, which the residual's tile loads cannot follow");
  // TMA moves 16-byte rows of channels: the kernel zero-pads x's channels-last copy and the filter to whole vectors
  // (a 3-channel image becomes 4 fp32 channels), but the filter's rows of k output channels must be whole already.
  // (The direct kernel reads channels-first planes: no such rows.)
  int vec = 16 / element_bytes(element);
  if (!direct() && k % vec)
    throw Error(fmt::format("conv problem c={} k={} ({}): the filter's TMA loads need a multiple of {} output channels "
                            "(16 bytes); PyTorch keeps this convolution", c, k, to_string(element), vec));
  if (auto why = direct() ? std::optional<std::string>() : sm90_evt_rejection(epilogue.tree))
    throw Error("conv problem: " + *why);
  if (epilogue.tree.reads_source("C") || epilogue.tree.any([](const EpilogueTree& t) {
        return t.kind == EpilogueNodeKind::col_broadcast;
      }))
    throw Error("conv problem: epilogue " + epilogue.key() + " reads C or a column vector; a convolution's epilogue "
                "reads per-channel vectors, scalars and a residual");
}

nlohmann::json ConvProblem::to_json() const {
  nlohmann::json j = {{"spatial_dims", spatial_dims}, {"n", n}, {"c", c}, {"k", k}, {"in", in}, {"filter", filter},
          {"out", out}, {"stride", stride}, {"padding", padding}, {"dilation", dilation},
          {"transposed", transposed}, {"output_padding", output_padding}, {"groups", groups},
          {"element", to_string(element)}, {"numerics", to_string(numerics())}, {"epilogue", epilogue.to_json()},
          {"arch", to_string(arch)}};
  if (channels_last) j["channels_last"] = true;  // only when set: a channels-first problem keeps the key it always had
  if (dense_direct) j["direct"] = true;          // and an implicit GEMM's
  if (!reduce.empty()) j.update({{"reduce", reduce}, {"reduce_over", reduce_over}});  // and one writing its output
  return j;
}

ConvProblem ConvProblem::from_json(const nlohmann::json& j) {
  return parse_family_json("conv problem", "ConvProblem::to_json", [&] {
    ConvProblem p;
    p.spatial_dims = j.at("spatial_dims");
    p.n = j.at("n");
    p.c = j.at("c");
    p.k = j.at("k");
    p.in = j.at("in");
    p.filter = j.at("filter");
    p.out = j.at("out");
    p.stride = j.at("stride");
    p.padding = j.at("padding");
    p.dilation = j.at("dilation");
    p.transposed = j.value("transposed", false);  // problems recorded before transposed convolutions were forward
    p.output_padding = j.value("output_padding", ConvDims{0, 0, 0});
    p.groups = j.value("groups", int64_t{1});  // and groups 1
    p.element = element_from_string(j.at("element"));
    p.epilogue = Epilogue::from_json(j.value("epilogue", nlohmann::json("none")));
    p.arch = arch_from_string(j.at("arch"));
    p.channels_last = j.value("channels_last", false);
    p.dense_direct = j.value("direct", false) && p.groups == 1;
    p.x3tf32 = j.value("numerics", "") == "3xtf32";
    p.reduce = j.value("reduce", "");
    p.reduce_over = j.value("reduce_over", "");
    return p;
  });
}

ConvProblem conv_problem_from_match(const discover::Match& m, const ir::Graph& g, Numerics numerics, Arch arch) {
  std::string what = fmt::format("pattern {} at node '{}'", m.rule, m.anchor);
  if (arch != Arch::sm90)
    throw Error(what + ": FACT's convolutions are sm90 kernels (TMA im2col); PyTorch keeps it on " + to_string(arch));
  const nlohmann::json ops = m.kernel.value("operands", nlohmann::json::object());
  const ir::Node* x = bound_node(m, g, ops.value("x", nlohmann::json()));
  const ir::Node* w = bound_node(m, g, ops.value("w", nlohmann::json()));
  if (!x || !w || x->outputs.empty() || w->outputs.empty())
    throw Error(what + ": the rule's kernel block names no bound tensors for operands x and w");
  const ir::TensorMeta& tx = x->out();
  const ir::TensorMeta& tw = w->out();
  ConvProblem p;
  auto transposed = m.attrs.find("transposed");
  p.transposed = transposed != m.attrs.end() && transposed->second.is_boolean() && transposed->second.get<bool>();
  if (tx.rank() < 3 || tx.rank() > 5 || tw.rank() != tx.rank())
    throw Error(fmt::format("{}: x is {}-D and w {}-D; a convolution of 1 to 3 spatial dims takes [n, c, ...] and "
                            "[{}, ...] of one rank", what, tx.rank(), tw.rank(), p.transposed ? "c, k" : "k, c"));
  p.spatial_dims = static_cast<int>(tx.rank()) - 2;
  p.n = tx.shape[0];
  p.c = tx.shape[1];
  auto groups = m.attrs.find("groups");
  if (groups != m.attrs.end() && groups->second.is_number_integer()) p.groups = groups->second.get<int64_t>();
  const int w_in = p.transposed ? 0 : 1;  // w's input-channel dim: [k, c / groups, ...], or [c, k / groups, ...]
  p.k = tw.shape[1 - w_in] * (p.transposed ? p.groups : 1);
  if (p.groups <= 0 || tw.shape[w_in] * (p.transposed ? 1 : p.groups) != p.c)
    throw Error(fmt::format("{}: w has {} input channels for x's {} in {} groups", what, tw.shape[w_in], p.c, p.groups));
  int lead = kConvSpatial - p.spatial_dims;
  for (int i = 0; i < p.spatial_dims; ++i) {
    p.in[lead + i] = tx.shape[2 + i];
    p.filter[lead + i] = tw.shape[2 + i];
  }
  p.stride = spatial_attr(m, "stride", p.spatial_dims, 1, what);
  p.padding = spatial_attr(m, "padding", p.spatial_dims, 0, what);
  p.dilation = spatial_attr(m, "dilation", p.spatial_dims, 1, what);
  if (p.transposed) p.output_padding = spatial_attr(m, "output_padding", p.spatial_dims, 0, what);
  for (int i = 0; i < kConvSpatial; ++i) p.out[i] = p.expected_out(i);

  // The convolution's own output, and the anchor's (the last op of a grown epilogue): one shape; a reducing match's
  // anchor (its reduction over the pixels or the channels) has the op's result's elements, the reduced dims kept as 1
  // or not.
  p.reduce = m.kernel.value("reduce", "");
  p.reduce_over = m.kernel.value("reduce_over", "");
  const ir::Node* conv = m.nodes.empty() ? nullptr : g.find(m.nodes.front());
  const ir::TensorMeta& anchor = g.at(m.anchor).out();
  std::vector<int64_t> want = {p.n, p.k}, kept = {p.n, p.reduce_over == "channels" ? 1 : p.k}, dropped = {p.n};
  if (p.reduce_over != "channels") dropped.push_back(p.k);
  for (int i = 0; i < p.spatial_dims; ++i) {
    want.push_back(p.out[lead + i]);
    kept.push_back(p.reduce_over == "pixels" ? 1 : p.out[lead + i]);
    if (p.reduce_over == "channels") dropped.push_back(p.out[lead + i]);
  }
  const bool anchor_ok = p.reduce.empty() ? anchor.shape == want : anchor.shape == kept || anchor.shape == dropped;
  if (!anchor_ok || (conv && !conv->outputs.empty() && conv->out().shape != want))
    throw Error(fmt::format("{}: the output is shaped [{}], but the attrs give [{}]{}", what,
                            fmt::join(anchor.shape, ", "), fmt::join(want, ", "),
                            p.reduce.empty() ? "" : " (reduced over the " + p.reduce_over + ")"));
  if (input_element(numerics) != element_from_string(tx.dtype) || tw.dtype != tx.dtype || anchor.dtype != tx.dtype)
    throw Error(fmt::format("{}: x, w and the output are {}, {}, {}; numerics {} takes {} for all", what, tx.dtype,
                            tw.dtype, anchor.dtype, to_string(numerics), to_string(input_element(numerics))));
  p.element = input_element(numerics);
  p.arch = arch;
  const nlohmann::json limits = family_data("conv").at("limits");
  // (Not in 3xTF32: its baseline is cuDNN with TF32 off, which the implicit GEMM's 3xTF32 kernels are measured against.)
  p.dense_direct = p.groups == 1 && !p.transposed && p.reduce.empty() && numerics != Numerics::x3tf32 &&
                   p.c <= limits.at("direct_dense_max_channels").get<int64_t>() &&
                   p.k <= limits.at("direct_dense_max_outputs").get<int64_t>();
  if (numerics == Numerics::x3tf32 && !p.direct()) p.x3tf32 = true;
  const ir::Node* bias = bound_node(m, g, ops.value("bias", nlohmann::json()));
  const ir::Node* residual = bound_node(m, g, ops.value("residual", nlohmann::json()));
  if (m.kernel.contains("epilogue_tree")) {
    p.epilogue = grown_epilogue(m, g, what, p.gemm_m(), p.k, bias, residual, /*channel_axis=*/1);
  } else {
    // Not grown: the tree growth starts from, alpha * acc (+ bias).
    nlohmann::json start = discover::starting_epilogue_tree(m);
    if (start.is_null())
      throw Error(what + ": a residual operand or extra outputs without an epilogue tree; fix the rule");
    p.epilogue = Epilogue::of(EpilogueTree::from_json(start));
  }
  p.validate();
  return p;
}

}  // namespace fact::realize
