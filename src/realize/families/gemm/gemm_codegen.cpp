#include "realize/families/gemm/gemm_codegen.h"

#include <fmt/format.h>

#include "core/error.h"
#include "realize/families/gemm/epilogue_activations.h"
#include "realize/families/gemm/epilogue_sm80.h"
#include "realize/families/gemm/epilogue_sm90_evt.h"
#include "realize/families/gemm/gemm_config_space.h"
#include "realize/kernel_family.h"

namespace fact::realize {
namespace {

std::string layout_name(MatrixLayout l) {
  return l == MatrixLayout::row ? "cutlass::layout::RowMajor" : "cutlass::layout::ColumnMajor";
}

std::string boolean(bool b) { return b ? "true" : "false"; }

// fp32 and 3xtf32 promise fp32's error against float64; tf32/bf16/fp16 round far more than any activation.
bool fp32_accurate(Numerics n) { return n == Numerics::fp32 || n == Numerics::x3tf32; }

// Whether the epilogue uses FACT's accurate activations: fp32-accurate modes, with an activation the table gives
// one for. Why: CUTLASS's GELU_taylor runs tanh.approx.f32, off fp32 by ~2^-11.
bool uses_fp32_activation(const GemmConfig& c) {
  if (!fp32_accurate(c.numerics)) return false;
  for (const auto& act : c.epilogue.tree.activations())
    if (!activation_entry(act).fp32_accurate.empty()) return true;
  return false;
}

// templates/cutlass/fp32_activation.hpp.in for the kernels whose epilogue uses one of its functors, else nothing;
// then the functors generated from the table's expr (activations without a CUTLASS functor, or with params),
// which build on its fact_act::Elementwise.
std::string fp32_activation_source(const GemmConfig& c) {
  std::string generated = c.api == KernelApi::cutlass3_collective ? sm90_evt_functors(c.epilogue.tree) : "";
  bool helpers = uses_fp32_activation(c) || !generated.empty();
  return (helpers ? render_template_file("cutlass/fp32_activation.hpp.in", {}) : "") + generated;
}

// A large problem with the config's layouts and widest alignments: validity of the config by itself.
GemmProblem reference_problem(const GemmConfig& c) {
  GemmProblem p = GemmProblem::packed(4096, 4096, 4096, 1, c.numerics, c.arch, c.layout_b == MatrixLayout::column,
                                      c.epilogue);
  p.a.layout = c.layout_a;
  p.d.layout = c.layout_d;
  p.element_in = c.element_in;
  p.element_out = c.element_out;
  return p;
}

// Widest fp32 vector (<= 4) that D's alignment guarantees divides N: the parallel split-K partials' access.
int partial_alignment(const GemmConfig& c) {
  int a = 1;
  while (a < 4 && c.alignment_d % (a * 2) == 0) a *= 2;
  return a;
}

// The FACT operand pre-pass kernels that configs with a mainloop transform embed before their GEMM.
std::string tf32_operand_prepass_source() { return render_template_file("cutlass/tf32_operand_prepass.cuh.in", {}); }
std::string sm90_gemm_common_source() { return render_template_file("cutlass/sm90_gemm_common.hpp.in", {}); }
std::string split3_mainloop_source() { return render_template_file("cutlass/sm90_split3_rmem_mainloop.hpp.in", {}); }

// The op wrapper's vectors argument (op_wrapper_op.cpp.in's vectors_* slots): a Tensor[] of the slots the tree
// reads, in slot order, each contiguous 1-D in D's dtype; empty for a tree without vec<i> (the op's code then
// stays as it was; gemm_op_schema_arguments writes the schema).
TemplateValues op_vector_values(const GemmConfig& c) {
  auto slots = vector_slot_kinds(c.epilogue.tree);
  if (slots.empty())
    return {{"vectors_param", ""}, {"vectors_arg", ""}, {"vectors_check", ""}, {"vectors_bind", ""}};
  std::string names, lengths, indices;
  for (const auto& [i, kind] : slots) {
    const char* sep = names.empty() ? "" : ", ";
    const char* k = kind == EpilogueNodeKind::row_broadcast ? "row" : kind == EpilogueNodeKind::col_broadcast ? "col" : "scalar";
    names += fmt::format("{}vec{} ({})", sep, i, k);
    lengths += fmt::format("{}{}", sep, kind == EpilogueNodeKind::row_broadcast   ? "n"
                                        : kind == EpilogueNodeKind::col_broadcast ? "batch * m"
                                                                                  : "int64_t(1)");
    indices += fmt::format("{}{}", sep, i);
  }
  std::string dtype_out = to_string(c.element_out);
  std::string check = fmt::format(
      "  // The epilogue's vec<i> slots {}: row [N], col [batch * M], scalar [1].\n"
      "  TORCH_CHECK(vectors.size() == {}, op, \": this kernel's epilogue reads {} vectors ({}), got \", vectors.size());\n"
      "  const int64_t vector_numel[] = {{{}}};\n"
      "  for (size_t j = 0; j < vectors.size(); ++j) {{\n"
      "    TORCH_CHECK(vectors[j].dim() == 1 && vectors[j].numel() == vector_numel[j] && vectors[j].is_contiguous() &&\n"
      "                    vectors[j].scalar_type() == {}, op, \": vectors[\", j, \"] must be a contiguous 1-D {} \"\n"
      "                \"tensor of \", vector_numel[j], \" values (slots {}); got \", vectors[j].sizes(), \" \",\n"
      "                vectors[j].scalar_type());\n"
      "  }}\n",
      names, slots.size(), slots.size(), names, lengths, torch_scalar_type(c.element_out), dtype_out, names);
  std::string bind = fmt::format(
      "  const int vector_slot[] = {{{}}};\n"
      "  for (size_t j = 0; j < vectors.size(); ++j) {{\n"
      "    TORCH_CHECK(vectors[j].device() == a.device(), op, \": vectors[\", j, \"] is not on a's device\");\n"
      "    args.vectors[vector_slot[j]] = vectors[j].data_ptr();\n"
      "  }}\n",
      indices);
  return {{"vectors_param", ", at::TensorList vectors"}, {"vectors_arg", ", vectors"},
          {"vectors_check", check}, {"vectors_bind", bind}};
}

}  // namespace

std::string gemm_kernel_template(const GemmConfig& config) {
  MainloopTransform t = config.mainloop_transform;
  const char* kernel = config.api == KernelApi::cutlass2_universal
                           ? (sm80_epilogue(config.epilogue.tree, false).broadcast ? "sm80_broadcast" : "sm80_universal")
                       : config.splits_in_registers()                                         ? "sm90_split3_rmem"
                       : t == MainloopTransform::none || t == MainloopTransform::transposed ? "sm90_collective"
                                                                                              : "sm90_tf32_prepass";
  const nlohmann::json templates = family_data("gemm").value("kernel_templates", nlohmann::json::object());
  if (!templates.contains(kernel) || !templates[kernel].is_string())
    throw Error(fmt::format("data/families/gemm.json has no kernel_templates.{}; add the template's path", kernel));
  return templates[kernel].get<std::string>();
}

TemplateValues gemm_kernel_values(const GemmConfig& c) {
  // The transposed problem (D^T = B^T A^T): the kernel's A is the caller's B read through the transposed layout
  // tag, its B the caller's A, its D the caller's D likewise.
  bool transposed = c.transposes_problem();
  auto flip = [](MatrixLayout l) { return l == MatrixLayout::row ? MatrixLayout::column : MatrixLayout::row; };
  TemplateValues v = {
      {"config_id", c.id()},
      {"summary", c.summary()},
      {"config_json", c.to_json().dump()},
      {"element_a", cutlass_type(c.element_in)},
      {"element_b", cutlass_type(c.element_in)},
      {"element_d", cutlass_type(c.element_out)},
      {"layout_a", layout_name(transposed ? flip(c.layout_b) : c.layout_a)},
      {"layout_b", layout_name(transposed ? flip(c.layout_a) : c.layout_b)},
      {"layout_d", layout_name(transposed ? flip(c.layout_d) : c.layout_d)},
      {"alignment_a", std::to_string(transposed ? c.alignment_b : c.alignment_a)},
      {"alignment_b", std::to_string(transposed ? c.alignment_a : c.alignment_b)},
      {"alignment_d", std::to_string(c.alignment_d)},
      {"threadblock_m", std::to_string(c.threadblock.m)},
      {"threadblock_n", std::to_string(c.threadblock.n)},
      {"threadblock_k", std::to_string(c.threadblock.k)},
      {"epilogue", to_string(c.epilogue)},
      {"has_bias", boolean(has_bias(c.epilogue))},
      {"fp32_activation", fp32_activation_source(c)},
  };
  if (c.api == KernelApi::cutlass3_collective) {
    bool stream_k = c.tile_scheduler == TileScheduler::stream_k;
    v["cluster_m"] = std::to_string(c.cluster.m);
    v["cluster_n"] = std::to_string(c.cluster.n);
    v["kernel_schedule"] = to_string(c.kernel_schedule);
    v["epilogue_schedule"] = to_string(c.epilogue_schedule);
    v["tile_scheduler"] = stream_k ? "StreamKScheduler" : "PersistentScheduler";
    v["stream_k"] = boolean(stream_k);
    v["sm90_gemm_common"] = sm90_gemm_common_source();
    v["has_residual"] = boolean(has_residual(c.epilogue));
    v["epilogue_tree"] = c.epilogue.tree.text();
    if (c.epilogue_schedule == EpilogueSchedule::NoSmemWarpSpecialized) {
      // The builder's no-smem epilogue takes exactly this fusion; its arguments are the thread op's (alpha, beta).
      v["fusion_tree"] = "fusion::LinearCombination<ElementD, ElementCompute, ElementC, ElementCompute, kRound>";
      v["fusion_arguments"] = "{a.alpha, beta}";
    } else {
      v["fusion_tree"] = sm90_evt_type(c.epilogue.tree, uses_fp32_activation(c), transposed);
      v["fusion_arguments"] = sm90_evt_arguments(c.epilogue.tree, transposed);
    }
    v["vector_checks"] = sm90_vector_checks(c.epilogue.tree, transposed);
    if (c.splits_in_registers()) {  // gemm_sm90_split3_rmem.cu.in counts its own stages
      v["transposed"] = boolean(transposed);
      v["split3_mainloop"] = split3_mainloop_source();
      v["operand_prepass"] = tf32_operand_prepass_source();
      v["split3_stages"] = std::to_string(c.stages);
      // Every k-tile (4 k-blocks) unless the config says how many.
      v["promotion_interval"] = std::to_string(c.promotion_interval > 0 ? c.promotion_interval : 4);
    } else {
      // Auto: the builder takes whatever shared memory the epilogue leaves.
      v["stage_count"] = c.stages == 0
          ? "cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>"
          : fmt::format("cutlass::gemm::collective::StageCount<{}>", c.stages);
      if (c.mainloop_transform == MainloopTransform::none || transposed) {
        v["transposed"] = boolean(transposed);
      } else {
        v["split3"] = boolean(c.mainloop_transform == MainloopTransform::split3_tf32);
        // 3xTF32 promises fp32 accuracy, which needs the accumulators promoted out of the tensor cores.
        v["promote_accumulators"] = boolean(c.promotion_interval > 0);
        v["promotion_interval"] = std::to_string(c.promotion_interval > 0 ? c.promotion_interval : 4);
        v["operand_prepass"] = tf32_operand_prepass_source();
      }
    }
  } else {
    v["split_k_slices"] = std::to_string(c.split_k_slices);
    v["op_class"] = c.op_class == OpClass::simt ? "cutlass::arch::OpClassSimt" : "cutlass::arch::OpClassTensorOp";
    v["warp_m"] = std::to_string(c.warp.m);
    v["warp_n"] = std::to_string(c.warp.n);
    v["warp_k"] = std::to_string(c.warp.k);
    v["instruction_m"] = std::to_string(c.instruction.m);
    v["instruction_n"] = std::to_string(c.instruction.n);
    v["instruction_k"] = std::to_string(c.instruction.k);
    v["stages"] = std::to_string(c.stages);
    v["math_operator"] = c.math_operator();
    v["threadblock_swizzle"] = c.tile_scheduler == TileScheduler::stream_k
        ? "cutlass::gemm::threadblock::ThreadblockSwizzleStreamK"
        : fmt::format("cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<{}>", c.swizzle);
    Sm80Epilogue epilogue = sm80_epilogue(c.epilogue.tree, uses_fp32_activation(c));
    if (epilogue.broadcast) {  // gemm_sm80_broadcast.cu.in
      v["activation_op"] = epilogue.activation_op;
      v["combine_op"] = epilogue.combine_op;
      return v;
    }
    v["epilogue_output_op"] = epilogue.output_op;
    v["split_k_mode"] = c.split_k_mode == SplitKMode::none     ? "kNone"
                        : c.split_k_mode == SplitKMode::serial ? "kSerial"
                                                               : "kParallel";
    v["partial_alignment"] = std::to_string(partial_alignment(c));
  }
  return v;
}

GeneratedSource generate_gemm_kernel(const GemmConfig& config) {
  if (auto why = gemm_config_rejection(reference_problem(config), config))
    throw Error(fmt::format("GEMM config {} ({}) cannot be generated: {}", config.id(), config.summary(), *why));
  // Every run-time variant of a kernel renders the same text (its kernel config's), so one build serves them all.
  GemmConfig kernel = config.kernel_config();
  GeneratedSource out;
  out.config_id = kernel.id();
  out.template_name = gemm_kernel_template(kernel);
  out.text = render_template_file(out.template_name, gemm_kernel_values(kernel));
  return out;
}

std::string gemm_op_wrapper_fragment(const GemmConfig& c) {
  // A run-time variant calls its kernel's symbols and sets its knobs (swizzle, raster, splits, reduction) itself.
  std::string run_time_arguments;
  const nlohmann::json knobs = c.run_time_arguments();
  for (auto& [field, value] : knobs.items())
    run_time_arguments += fmt::format("  args.{} = {};\n", field, value.dump());
  TemplateValues v = {
      {"config_id", c.id()},
      {"kernel_id", c.kernel_id()},
      {"run_time_arguments", run_time_arguments},
      {"summary", c.summary()},
      {"numerics", to_string(c.numerics)},
      {"torch_dtype_in", torch_scalar_type(c.element_in)},
      {"dtype_in", to_string(c.element_in)},
      {"torch_dtype_out", torch_scalar_type(c.element_out)},
      {"dtype_out", to_string(c.element_out)},
      {"has_bias", boolean(has_bias(c.epilogue))},
      {"has_residual", boolean(has_residual(c.epilogue))},
      {"a_row_major", boolean(c.layout_a == MatrixLayout::row)},
      {"b_row_major", boolean(c.layout_b == MatrixLayout::row)},
      {"d_row_major", boolean(c.layout_d == MatrixLayout::row)},
      {"schema_arguments", gemm_op_schema_arguments(c.epilogue)},
  };
  for (auto& [k, val] : op_vector_values(c)) v[k] = val;
  return render_template_file(family_template("gemm", "op_template"), v);
}

std::string gemm_op_schema_arguments(const Epilogue& e) {
  return std::string("(Tensor a, Tensor b, Tensor? bias, Tensor? residual") +
         (e.tree.vector_slots().empty() ? "" : ", Tensor[] vectors") + ", *, bool b_constant=False) -> Tensor";
}

GeneratedSource op_library_source(const std::vector<std::string>& op_fragments) {
  if (op_fragments.empty()) throw Error("op wrapper: no ops given; pass at least one");
  std::string ops;
  for (const auto& f : op_fragments) ops += f + "\n";
  GeneratedSource src;
  src.template_name = "cutlass/op_wrapper.cpp.in";
  src.text = render_template_file(src.template_name, {{"op_count", std::to_string(op_fragments.size())}, {"ops", ops}});
  return src;
}

GeneratedSource generate_gemm_op_wrapper(const std::vector<GemmConfig>& configs) {
  if (configs.empty()) throw Error("op wrapper: no kernel configs given; pass at least one");
  std::vector<std::string> fragments;
  for (const auto& c : configs) fragments.push_back(gemm_op_wrapper_fragment(c));
  GeneratedSource src = op_library_source(fragments);
  src.config_id = configs.size() == 1 ? configs[0].id() : "";
  return src;
}

}  // namespace fact::realize
