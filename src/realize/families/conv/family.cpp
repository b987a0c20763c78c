// The conv family behind the KernelFamily seam: conv matches (with their grown epilogues) to CUTLASS 3.x implicit-GEMM
// kernels and op wrappers rendered from templates/cutlass/conv_sm90_fprop.cu.in and conv_op.cpp.in (only the values
// come from here), and the composed module's call of the op.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compose/python_expr.h"
#include "core/error.h"
#include "realize/families/conv/family.h"
#include "realize/families/gemm/epilogue_scalar.h"
#include "realize/families/gemm/epilogue_sm90_evt.h"
#include "realize/family_codegen.h"
#include "realize/kernel_family.h"
#include "realize/template_renderer.h"
#include "realize/typed_kernel_family.h"

namespace fact::realize {
namespace {

constexpr const char* kLayouts[] = {"TensorNWC", "TensorNHWC", "TensorNDHWC"};

std::string boolean(bool b) { return b ? "true" : "false"; }

// The config's reduce_over as fact_evt::ConvReduce numbers it (templates/cutlass/conv_output_store.hpp.in): 0 none,
// 1 each image's pixels, 2 each pixel's channels; the kernel and its op wrapper read the same number.
std::string reduce_kind(const ConvConfig& c) { return c.reduce.empty() ? "0" : c.reduce_over == "pixels" ? "1" : "2"; }

}  // namespace

// A grouped convolution's direct kernel (templates/cute/conv_direct.cu.in): the filter, stride and dilation as
// constants, the epilogue tree as one float expression per output element.
GeneratedSource generate_conv_direct_kernel(const ConvConfig& c) {
  const EpilogueTree& tree = c.epilogue.tree;
  TemplateValues v = kernel_slots(c, {"spatial_dims"});
  // (A chain's config has no tile: the plane-staging kernel it also compiles, unused, keeps the defaults.)
  v["tile_w"] = std::to_string(c.tile_w);
  v["rows_per_warp"] = std::to_string(c.rows_per_warp);
  v["channel_block"] = std::to_string(c.channel_block);
  v["taps_by_row"] = boolean(conv_direct_taps_by_row(c));
  for (int i = 0; i < kConvSpatial; ++i) {
    v[fmt::format("filter{}", i)] = std::to_string(c.filter[i]);
    v[fmt::format("stride{}", i)] = std::to_string(c.stride[i]);
    v[fmt::format("dilation{}", i)] = std::to_string(c.dilation[i]);
  }
  v["smem_bytes"] = std::to_string(conv_direct_smem_bytes(c));
  v["threads"] = std::to_string(family_data("conv").at("limits").at("direct_threads").get<int>());
  v["element"] = cutlass_type(c.element);
  v["epilogue_tree"] = tree.text();
  v["fp32_activation"] = render_template_file("cutlass/fp32_activation.hpp.in", {}) +
                         activation_scalar_functors(tree, /*all=*/true);
  v["epilogue_expression"] = scalar_epilogue_expression(tree);
  v["has_bias"] = boolean(tree.reads_bias());
  v["has_residual"] = boolean(tree.reads_source("residual"));
  v["channels_last"] = boolean(c.channels_last);
  // Each vector slot's value for the CTA's channel: a per-channel one's entry, a one-element one's value.
  std::string loads, checks;
  for (const auto& [i, kind] : vector_slot_kinds(tree)) {
    loads += fmt::format("  const float vec{} = load(static_cast<const Element*>(a.vectors[{}]), {});\n", i, i,
                         kind == EpilogueNodeKind::row_broadcast ? "channel" : "0");
    checks += fmt::format("  if (!a.vectors[{}]) return FACT_ERR_SHAPE;  // vec{}\n", i, i);
  }
  v["vector_loads"] = loads;
  v["vector_checks"] = checks;
  return render_family_template("conv", "direct_kernel_template", c.id(), v);
}

GeneratedSource generate_conv_kernel(const ConvConfig& c) {
  if (c.direct) return generate_conv_direct_kernel(c);
  if (c.spatial_dims < 1 || c.spatial_dims > kConvSpatial || c.arch != Arch::sm90)
    throw Error(fmt::format("conv config {} ({}): sm90 kernels of 1 to 3 spatial dims only", c.id(), c.summary()));
  const EpilogueTree& tree = c.epilogue.tree;
  TemplateValues v = kernel_slots(c, {"spatial_dims", "tile_m", "tile_n", "tile_k", "cluster_m", "cluster_n",
                                     "ctas_per_sm", "consumer_warpgroups"});
  v["cta_smem_bytes"] = std::to_string(conv_cta_smem_bytes(c));
  v["element"] = cutlass_type(c.element);
  v["layout"] = kLayouts[c.spatial_dims - 1];
  v["epilogue"] = c.epilogue.key();
  v["epilogue_tree"] = tree.text();
  // TF32/bf16/fp16 round far more than any activation: CUTLASS's functors, plus the table's generated ones.
  std::string functors = sm90_evt_functors(tree);
  v["fp32_activation"] = functors.empty() ? "" : render_template_file("cutlass/fp32_activation.hpp.in", {}) + functors;
  v["conv_output_store"] = render_template_file("cutlass/conv_output_store.hpp.in", {});
  v["conv_persistent_kernel"] = render_template_file("cutlass/conv_persistent_kernel.hpp.in", {});
  v["conv_promoting_mainloop"] = render_template_file("cutlass/conv_promoting_mainloop.hpp.in", {});
  v["fusion_tree"] = sm90_evt_type(tree, false);
  v["fusion_arguments"] = sm90_evt_arguments(tree);
  v["vector_checks"] = sm90_vector_checks(tree);
  v["has_bias"] = boolean(tree.reads_bias());
  v["has_residual"] = boolean(tree.reads_source("residual"));
  v["fold_width"] = boolean(c.fold_width);
  v["x3tf32"] = boolean(c.x3tf32);
  v["promotion_k_blocks"] = std::to_string(c.promotion_k_blocks);
  v["phase_group"] = std::to_string(kConvPhaseGroup);
  v["splits"] = std::to_string(c.splits);
  v["pingpong"] = boolean(c.pingpong);
  // fact_evt::ConvReduce and ConvReduceOp (templates/cutlass/conv_output_store.hpp.in).
  v["reduce_kind"] = reduce_kind(c);
  v["reduce_op"] = std::to_string(c.reduce == "max" ? 1 : c.reduce == "min" ? 2 : 0);
  v["reduce_mean"] = boolean(c.reduce == "mean");
  return render_family_template("conv", "kernel_template", c.id(), v);
}

std::string conv_op_schema(const ConvConfig& c) {
  return c.id() + "(Tensor x, Tensor w, Tensor? bias, Tensor? residual, int[] stride, int[] padding, int[] dilation, "
                  "bool transposed, int[] output_padding, int groups, Tensor[] vectors, *, bool w_constant=False, "
                  "bool channels_last=False) -> Tensor";
}

GeneratedSource generate_conv_op_wrapper(const ConvConfig& c) {
  TemplateValues v = op_wrapper_slots(c, conv_op_schema(c), {"spatial_dims"});
  const EpilogueTree& tree = c.epilogue.tree;
  v["has_bias"] = boolean(tree.reads_bias());
  v["has_residual"] = boolean(tree.reads_source("residual"));
  v["direct"] = boolean(c.direct);
  v["any_layout"] = boolean(!c.direct || c.channels_last);
  v["reduce"] = reduce_kind(c);
  auto slots = vector_slot_kinds(tree);
  std::string names, bind;
  for (size_t j = 0; j < slots.size(); ++j) {
    names += fmt::format("{}vec{}", j ? ", " : "", slots[j].first);
    bind += fmt::format("  a.vectors[{}] = held[{}].data_ptr();\n", slots[j].first, j);
  }
  v["vector_count"] = std::to_string(slots.size());
  v["vector_names"] = names.empty() ? "none" : names;
  v["vectors_bind"] = bind;
  return render_family_template("conv", "op_template", c.id(), v);
}

namespace {

// x and w as the module has them, bias / residual / vectors as bound, the tuned problem's stride, padding, dilation,
// transposed, output padding and groups (the ABI's (d, h, w), of which the conv's own dims are the last spatial_dims); the
// result is channels-first, as PyTorch's convolution returns it, or channels-last where the composer asks. A module
// weight is marked w_constant (its channels-last copy is kept).
OpCall conv_op_call(const OpCallSite& s) {
  ConvProblem p = ConvProblem::from_json(s.problem);
  auto own = [&](const ConvDims& d) {
    return fmt::format("[{}]", fmt::join(std::vector<int64_t>(d.end() - p.spatial_dims, d.end()), ", "));
  };
  std::string vectors;
  // Flattened where the graph's tensor is not 1-D already (a [k, 1, 1] parameter; a bias and BatchNorm's [k]
  // statistics as they are: a Python call less per vector and op).
  auto flat = [&](const char* operand) {
    std::string t = s.tensor(operand, false);
    const ir::Node* n = s.node(operand);
    return t == "None" || (n && !n->outputs.empty() && n->outputs[0].rank() == 1) ? t : t + ".reshape(-1)";
  };
  for (const auto& [i, kind] : vector_slot_kinds(p.epilogue.tree)) {
    std::string slot = fmt::format("vec{}", i);
    s.tensor(slot.c_str(), true);  // names the slot when the rule binds nothing to it
    vectors += (vectors.empty() ? "" : ", ") + flat(slot.c_str());
  }
  std::string expr = fmt::format("{}({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, [{}])", s.op, s.tensor("x", true),
                                 s.tensor("w", true), flat("bias"),
                                 s.tensor("residual", false), own(p.stride), own(p.padding), own(p.dilation),
                                 p.transposed ? "True" : "False", own(p.output_padding), p.groups, vectors);
  const ir::Node* w = s.node("w");
  if (w && ir::is_module_state(s.graph, *w)) expr.insert(expr.size() - 1, ", w_constant=True");
  if (s.channels_last) expr.insert(expr.size() - 1, ", channels_last=True");
  // A reducing op returns [n, k] or [n, 1, pixels...]: the anchor's shape (the reduced dims kept as 1 or dropped) is a
  // view of it.
  const ir::TensorMeta& anchor = s.graph.at(s.match.anchor).out();
  if (!p.reduce.empty() && anchor.shape != p.result_shape())
    expr += fmt::format(".view({})", fmt::join(anchor.shape, ", "));
  return {"", expr};
}

// An implicit-GEMM kernel reads x (whole 16-byte vectors of channels; a width-folded one gathers it from either
// order) and the residual in place when they are channels-last, and writes either order; a direct kernel staging
// channel planes is channels-first only, a chain's (an element a thread) reads and writes either order.
ChannelsLast conv_channels_last(const ConvProblem& p, const ConvConfig& c) {
  if (c.direct) return c.channels_last ? ChannelsLast{{"x", "residual"}, true} : ChannelsLast{};
  ChannelsLast out{{"residual"}, c.reduce.empty()};  // a reducing kernel writes channels-first
  if (p.padded_c() == p.c && !c.fold_width) out.reads.push_back("x");
  return out;
}

// Every convolution a chain feeds is tuned channels-last; a grouped one then by the direct kernel of an element a
// thread (MobileNet's depthwise convs keep their 1x1 neighbours' layout), a dense one by the implicit GEMM (the element
// kernel re-reads each input pixel for every output channel).
ConvProblem conv_in_channels_last_chain(ConvProblem p) {
  p.channels_last = true;
  p.dense_direct = false;
  return p;
}

const bool registered = register_typed_family<ConvProblem, ConvConfig>(
    {.name = "conv", .workload_layout = "ndhwc", .problem_from_match = conv_problem_from_match,
     .config_space = enumerate_conv_configs, .kernel = generate_conv_kernel, .op_schema = conv_op_schema,
     .op_wrapper = generate_conv_op_wrapper, .op_call = conv_op_call, .channels_last = conv_channels_last,
     .in_channels_last_chain = conv_in_channels_last_chain});

}  // namespace
}  // namespace fact::realize
