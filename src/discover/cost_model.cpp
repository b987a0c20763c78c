#include "discover/cost_model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"

namespace fact::discover {
namespace {

// cuBLAS-like libraries tile the output 128x128 and do not split K: partial last waves idle SMs.
constexpr double kLibraryTile = 128.0;
// Fraction of the measured library rate a tuned FACT kernel is assumed to reach on full waves.
constexpr double kFusedGemmEfficiency = 0.95;
// Attention kernels reach less of the matrix rate than plain GEMMs (softmax between the products).
constexpr double kFusedAttentionEfficiency = 0.6;

const ir::TensorMeta* value_meta(const ir::Graph& g, const nlohmann::json& arg) {
  if (!ir::is_ref(arg)) return nullptr;
  const ir::Node* n = g.find(ir::ref_name(arg));
  if (!n || n->outputs.empty()) return nullptr;
  size_t idx = arg.contains("index") ? arg["index"].get<size_t>() : 0;
  return idx < n->outputs.size() ? &n->outputs[idx] : nullptr;
}

// Tensor arguments of a node in order (refs only, lists flattened).
std::vector<const ir::TensorMeta*> tensor_args(const ir::Graph& g, const ir::Node& node) {
  std::vector<const ir::TensorMeta*> out;
  std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& a) {
    if (ir::is_ref(a)) {
      if (auto* m = value_meta(g, a)) out.push_back(m);
    } else if (a.is_array()) {
      for (auto& e : a) walk(e);
    }
  };
  for (auto& a : node.args) walk(a);
  for (auto& [k, v] : node.kwargs.items()) walk(v);
  return out;
}

double output_bytes(const ir::Node& node) {
  double b = 0;
  for (auto& o : node.outputs) b += static_cast<double>(o.bytes());
  return b;
}

// Reduction length K of a GEMM-category node: the last dim of its left operand.
bool is_convolution(const ir::Node& node) { return node.op.find("aten.conv") == 0; }

// What a convolution multiplies in: cuDNN's and FACT's fp32 convolutions run TF32 (PyTorch's default), unless the
// plan's are fp32-accurate: then cuDNN's fp32 (TF32 off) against FACT's 3xTF32.
Numerics conv_numerics(const CostContext& ctx, Numerics n) {
  if (n != Numerics::fp32 && n != Numerics::x3tf32) return n;
  return ctx.conv_numerics == Numerics::x3tf32 ? n : Numerics::tf32;
}

double gemm_k(const ir::Node& node, const std::vector<const ir::TensorMeta*>& ins) {
  // A convolution's reduction is its filter's C x taps (w is [k, c, ...]).
  if (is_convolution(node))
    return ins.size() >= 2 && !ins[1]->shape.empty() ? static_cast<double>(ins[1]->numel()) / ins[1]->shape[0] : 0;
  size_t left = (node.op.find("addmm") != std::string::npos || node.op.find("baddbmm") != std::string::npos) ? 1 : 0;
  if (ins.size() <= left || ins[left]->shape.empty()) return 0;
  return static_cast<double>(ins[left]->shape.back());
}

bool attention_is_causal(const ir::Node& node) {
  if (node.kwargs.contains("is_causal") && node.kwargs["is_causal"].is_boolean()) return node.kwargs["is_causal"].get<bool>();
  return node.args.size() > 5 && node.args[5].is_boolean() && node.args[5].get<bool>();
}

double attention_flops(const ir::TensorMeta& q, const ir::TensorMeta& k, bool causal) {
  if (q.rank() < 2 || k.rank() < 2) return 0;
  double tq = q.shape[q.rank() - 2], d = q.shape.back(), tk = k.shape[k.rank() - 2];
  double bh = static_cast<double>(q.numel()) / (tq * d);
  double f = 4.0 * bh * tq * tk * d;
  return causal ? f / 2 : f;
}

}  // namespace

NodeCost estimate_node(const ir::Node& node, const CostContext& ctx) {
  NodeCost c;
  if (node.kind != ir::NodeKind::Op) return c;
  ir::OpCategory cat = node.category;
  if (cat == ir::OpCategory::View || node.op == "getitem") return c;  // metadata only, no kernel

  auto ins = tensor_args(ctx.graph, node);
  double in_bytes = 0;
  for (auto* m : ins) in_bytes += static_cast<double>(m->bytes());
  double out_bytes = output_bytes(node);
  double out_numel = node.outputs.empty() ? 0 : static_cast<double>(node.outputs[0].numel());
  c.bytes = in_bytes + out_bytes;
  c.kernels = 1;
  const ArchSpec& a = ctx.arch;
  double mem_s = c.bytes / a.dram_bytes_per_s;

  switch (cat) {
    case ir::OpCategory::Gemm: {
      double k = gemm_k(node, ins);
      c.flops = 2.0 * out_numel * k;
      Numerics base = baseline_numerics(ctx.numerics);
      double rate = a.gemm_rate(is_convolution(node) ? conv_numerics(ctx, base) : base);
      double tiles = 1;
      if (is_convolution(node)) {
        tiles = std::ceil(out_numel / (kLibraryTile * kLibraryTile));
      } else if (!node.outputs.empty() && node.outputs[0].rank() >= 2) {
        auto& s = node.outputs[0].shape;
        double m = s[s.size() - 2], n = s.back();
        tiles = std::ceil(m / kLibraryTile) * std::ceil(n / kLibraryTile) * (out_numel / (m * n));
      }
      c.seconds = std::max(c.flops / (rate * wave_efficiency(tiles, a.sm_count)), mem_s);
      break;
    }
    case ir::OpCategory::Attention: {
      if (ins.size() >= 2) c.flops = attention_flops(*ins[0], *ins[1], attention_is_causal(node));
      // PyTorch's fused attention reaches about half the matrix rate of its numerics.
      double rate = a.gemm_rate(baseline_numerics(ctx.numerics)) * 0.5;
      c.seconds = std::max(c.flops / rate, mem_s);
      break;
    }
    case ir::OpCategory::Normalization:
    case ir::OpCategory::Softmax:
    case ir::OpCategory::Reduction:
      c.flops = 5.0 * out_numel;
      c.seconds = std::max(c.flops / a.simt_flops, mem_s);
      break;
    default:
      c.flops = out_numel;
      c.seconds = std::max(c.flops / a.simt_flops, mem_s);
  }
  c.seconds += a.launch_overhead_s;
  return c;
}

CostEstimate estimate_match(const Match& match, const CostContext& ctx) {
  CostEstimate e;
  const ArchSpec& a = ctx.arch;
  std::set<std::string> covered(match.nodes.begin(), match.nodes.end());
  for (auto& name : match.nodes) {
    NodeCost nc = estimate_node(ctx.graph.at(name), ctx);
    e.flops += nc.flops;
    e.bytes_now += nc.bytes;
    e.seconds_now += nc.seconds;
    e.kernels_now += nc.kernels;
  }
  // Minimum traffic of one fused kernel: every external tensor it reads, and its result, once.
  std::set<std::string> external;
  for (auto& name : match.nodes)
    for (auto& r : ir::referenced_names(ctx.graph.at(name)))
      if (!covered.count(r)) external.insert(r);
  for (auto& r : external) {
    const ir::Node& n = ctx.graph.at(r);
    if (!n.outputs.empty()) e.bytes_fused += static_cast<double>(n.outputs[0].bytes());
  }
  // A kernel that writes one value per row in place of the anchor's value (a whole-tensor reduction's partials:
  // dims "partials") writes that many elements.
  const ir::Node& anchor = ctx.graph.at(match.anchor);
  auto partials = match.dims.find("partials");
  e.bytes_fused += partials == match.dims.end() || anchor.outputs.empty()
                       ? output_bytes(anchor)
                       : static_cast<double>(partials->second) * anchor.out().bytes() / std::max<int64_t>(1, anchor.out().numel());
  for (auto& [id, node] : match.extra_outputs) e.bytes_fused += output_bytes(ctx.graph.at(node));

  double mem_s = e.bytes_fused / a.dram_bytes_per_s;
  double compute_s = 0, library_s = 0;
  const std::string& fam = match.family;
  // A convolution is an implicit GEMM (its rule's dims M, N, K).
  if (fam.find("gemm") != std::string::npos || fam == "conv") {
    auto dim = [&](const char* k, double fallback) {
      auto it = match.dims.find(k);
      return it != match.dims.end() ? static_cast<double>(it->second) : fallback;
    };
    double m = dim("M", 0), n = dim("N", 0), k = dim("K", 0), batch = dim("batch", 1);
    double gemm_flops = (m > 0 && n > 0 && k > 0) ? 2.0 * m * n * k * batch : e.flops;
    // GEMMs of the same shape that the realization leaves to PyTorch before the fused kernel (SwiGLU's up
    // projection) cost what they cost now.
    double library_gemms = dim("library_gemms", 0);
    if (library_gemms > 0 && m > 0 && n > 0 && k > 0) {
      double lib_tiles = std::ceil(m / kLibraryTile) * std::ceil(n / kLibraryTile) * batch;
      library_s = library_gemms * (2.0 * m * n * k * batch /
                                       (a.gemm_rate(baseline_numerics(ctx.numerics)) * wave_efficiency(lib_tiles, a.sm_count)) +
                                   a.launch_overhead_s);
    }
    // FACT picks tile sizes and split-K slices, so it fills the chip when the output is small.
    double tiles = std::ceil(m / kLibraryTile) * std::ceil(n / kLibraryTile) * batch;
    double eff = wave_efficiency(tiles, a.sm_count);
    if (tiles > 0 && tiles < a.sm_count && k >= 1024) {
      double slices = std::max(1.0, std::min(std::floor(a.sm_count / tiles), std::floor(k / 256)));
      eff = std::max(eff, wave_efficiency(tiles * slices, a.sm_count));
    }
    double rate = a.gemm_rate(fam == "conv" ? conv_numerics(ctx, ctx.numerics) : ctx.numerics) * kFusedGemmEfficiency *
                  std::max(eff, 1e-3);
    // A grouped convolution runs as a direct kernel: fp32 FMAs, no tensor cores.
    auto groups = match.attrs.find("groups");
    if (fam == "conv" && groups != match.attrs.end() && groups->second.is_number_integer() &&
        groups->second.get<int64_t>() > 1)
      rate = a.simt_flops;
    compute_s = gemm_flops / rate;  // epilogue arithmetic hides under the main loop
  } else if (fam.find("attention") != std::string::npos) {
    // A causal kernel skips the masked upper triangle; a hand-written chain's matmuls compute it
    // (an sdpa node's FLOPs already exclude it).
    bool causal = match.attrs.count("causal") && match.attrs.at("causal") == true;
    bool anchor_is_sdpa = ctx.graph.at(match.anchor).category == ir::OpCategory::Attention;
    double fused_flops = (causal && !anchor_is_sdpa) ? e.flops / 2 : e.flops;
    compute_s = fused_flops / (a.gemm_rate(ctx.numerics) * kFusedAttentionEfficiency);
  } else {
    compute_s = e.flops / a.simt_flops;
  }
  e.bound = compute_s >= mem_s ? "compute" : "memory";
  e.seconds_fused = std::max(compute_s, mem_s) + a.launch_overhead_s + library_s;
  return e;
}

double estimate_graph_seconds(const CostContext& ctx) {
  double s = 0;
  for (auto& n : ctx.graph.nodes) s += estimate_node(n, ctx).seconds;
  return s;
}

}  // namespace fact::discover
