#pragma once
// One GEMM kernel configuration in CUTLASS's own terms (threadblock/warp/instruction shape, stages,
// cluster, kernel/epilogue schedule, tile scheduler, split-K, swizzle, alignment), plus the problem
// traits the generated kernel is specialized on (layouts, elements, numerics, epilogue).
// Its id is a hash of the canonical JSON, so equal configs get equal ids across runs and machines.
#include <string>

#include <nlohmann/json.hpp>

#include "realize/families/gemm/gemm_problem.h"

namespace fact::realize {

// Which CUTLASS API the kernel is built from.
enum class KernelApi {
  cutlass2_universal,   // CUTLASS 2.x cutlass::gemm::device::GemmUniversal (ArchTag Sm80; runs on sm80 and sm90)
  cutlass3_collective   // CUTLASS 3.x CollectiveBuilder + kernel::GemmUniversal (sm90 wgmma + TMA)
};
enum class OpClass { tensor_op, simt };  // arch::OpClassTensorOp / arch::OpClassSimt
// cutlass::gemm::Kernel* schedules of the 3.x builder; `none` for 2.x kernels.
enum class KernelSchedule { none, KernelTmaWarpSpecializedCooperative, KernelTmaWarpSpecializedPingpong };
// cutlass::epilogue::* schedules of the 3.x epilogue builder; `none` for 2.x kernels.
// NoSmemWarpSpecialized stores D from registers, element by element: a D whose rows are not 16-byte aligned (an odd
// vocabulary's logits) cannot take TMA stores. CUTLASS builds it for the linear epilogue only.
enum class EpilogueSchedule { none, TmaWarpSpecializedCooperative, TmaWarpSpecialized, NoSmemWarpSpecialized };
// 3.x: PersistentScheduler / StreamKScheduler; 2.x: GemmIdentityThreadblockSwizzle (data_parallel) /
// ThreadblockSwizzleStreamK (stream_k).
enum class TileScheduler { data_parallel, persistent, stream_k };
// serial: slices accumulate into D in turn (2.x GemmUniversal kGemm with batch_count = slices, or the
// 3.x stream-K scheduler with splits); parallel: slices write fp32 partials to the workspace and a
// ReduceSplitK kernel sums them and applies the epilogue (2.x only).
enum class SplitKMode { none, serial, parallel };
// A FACT pre-pass that rewrites A and B into workspace copies before a 3.x TF32 GEMM runs on them, for
// what sm90 wgmma cannot do in its mainloop (CUTLASS 3.x has no in-kernel 3xTF32 and no K-major-only fix):
//   split3_tf32: A' = [A_big | A_big | A_small], B' = [B_big ; B_small ; B_big], both K-major, K' = 3K, so
//                one TF32 GEMM computes A_big B_big + A_big B_small + A_small B_big (3xTF32, fp32-level error);
//   kmajor_tf32: operands that are not K-major (or not 16-byte aligned) are copied K-major, rounded to TF32.
// And one that is no pre-pass:
//   transposed: the kernel computes D^T = B^T A^T, reading the caller's B as its A and A as its B in place (the
//               transposed layout tags over the same memory), so an MN-major B becomes the MN-major A that CUTLASS's
//               register-sourced TF32 mainloop transposes on its way to the MMA.
// And one in between:
//   split3_rmem: 3xTF32 as the transposed problem whose A (the caller's B, K-major fp32, read in place) FACT's mainloop
//                splits in registers, against B' = [A_big | A_small] written by a pre-pass from the caller's (short) A:
//                the caller's B is read once, where split3_tf32 reads three copies of it (a weight-bound GEMM's cost);
//   split3_rmem_a: the same mainloop on the problem as it is: the caller's A (row-major) split in registers, B' from
//                the caller's B (any layout; kept between calls for a weight): no copy of A at all.
enum class MainloopTransform { none, split3_tf32, kmajor_tf32, transposed, split3_rmem, split3_rmem_a };
// 3.x tile schedulers' raster order (RasterOrderOptions): which grid dimension consecutive tiles walk first.
enum class RasterOrder { heuristic, along_m, along_n };

std::string to_string(KernelApi v);
std::string to_string(OpClass v);
std::string to_string(KernelSchedule v);
std::string to_string(EpilogueSchedule v);
std::string to_string(TileScheduler v);
std::string to_string(SplitKMode v);
std::string to_string(MainloopTransform v);
std::string to_string(RasterOrder v);

struct GemmShape {  // M x N x K, as cutlass::gemm::GemmShape / cute::Shape
  int m = 0, n = 0, k = 0;
  bool operator==(const GemmShape&) const = default;
};

struct GemmConfig {
  // Where it runs and what it computes.
  Arch arch = Arch::sm90;                      // compile target: sm_80 or sm_90a
  KernelApi api = KernelApi::cutlass3_collective;
  Numerics numerics = Numerics::bf16;
  OpClass op_class = OpClass::tensor_op;
  MatrixLayout layout_a = MatrixLayout::row, layout_b = MatrixLayout::column, layout_d = MatrixLayout::row;
  Element element_in = Element::bf16, element_out = Element::bf16;
  Epilogue epilogue;
  int alignment_a = 8, alignment_b = 8, alignment_d = 8;  // elements per vector access
  // The hierarchy.
  GemmShape threadblock{128, 128, 64};         // CTA tile (3.x: TileShape)
  GemmShape warp{64, 64, 64};                  // 2.x warp tile; 3.x: per-warpgroup tile (informational)
  GemmShape instruction{16, 8, 16};            // mma.sync shape (2.x) or wgmma shape (3.x)
  int stages = 3;                              // 3.x: 0 = StageCountAutoCarveout
  GemmShape cluster{1, 1, 1};                  // 3.x only
  KernelSchedule kernel_schedule = KernelSchedule::none;
  EpilogueSchedule epilogue_schedule = EpilogueSchedule::none;
  TileScheduler tile_scheduler = TileScheduler::data_parallel;
  SplitKMode split_k_mode = SplitKMode::none;
  int split_k_slices = 1;
  int swizzle = 1;                             // 2.x GemmIdentityThreadblockSwizzle<N>; 3.x max_swizzle_size
  // 3.x only. Written to the JSON only when not `none`, so the ids of configs without it stay as they were.
  // With a transform, layout_a/layout_b and alignment_a/alignment_b describe the caller's operands (what the
  // pre-pass reads); the GEMM itself reads K-major, 16-byte aligned workspace copies.
  MainloopTransform mainloop_transform = MainloopTransform::none;
  // 3.x stream-K/split-K only: partial tiles reduced in any order (atomics into the workspace) instead
  // of CUTLASS's default turnstile, which makes the slices of one tile wait for each other in K order.
  bool nondeterministic_reduction = false;
  // 3xTF32 splits (splits_3xtf32()): wgmma k-blocks between promotions of the tensor-core accumulators into fp32
  // registers (CUTLASS's mma_promotion_interval); 0 = never. Shorter is more accurate and slower.
  int promotion_interval = 0;
  // 3.x only; written to the JSON only when not `heuristic`.
  RasterOrder raster_order = RasterOrder::heuristic;

  // 3.x kernels take their tile scheduler's knobs (swizzle, raster order, splits, reduction mode) at run time:
  // the kernel that is compiled is the config with those knobs at their defaults (the same for every variant,
  // so one build serves them all); the variant passes its knobs through FactGemmArgs. 2.x kernels compile
  // every knob in: their kernel config is the config itself.
  GemmConfig kernel_config() const;
  std::string kernel_id() const { return kernel_config().id(); }
  // The FactGemmArgs fields this variant sets for its kernel ({"swizzle", "raster", "splits", "reduction"});
  // empty for 2.x kernels.
  nlohmann::json run_time_arguments() const;

  // Whether the kernel computes the transposed problem D^T = B^T A^T (its M x N is the caller's N x M).
  bool transposes_problem() const {
    return mainloop_transform == MainloopTransform::transposed || mainloop_transform == MainloopTransform::split3_rmem;
  }
  // Whether the kernel computes 3xTF32 by splitting operands (and promotes its accumulators).
  bool splits_3xtf32() const { return mainloop_transform == MainloopTransform::split3_tf32 || splits_in_registers(); }
  // Whether FACT's register-split mainloop runs it (sm90_split3_rmem_mainloop.hpp.in), in either orientation.
  bool splits_in_registers() const {
    return mainloop_transform == MainloopTransform::split3_rmem || mainloop_transform == MainloopTransform::split3_rmem_a;
  }

  // CUTLASS math operator: arch::OpMultiplyAdd, or arch::OpMultiplyAddFastF32 for 3xTF32.
  std::string math_operator() const;
  // Shared memory one mainloop stage takes (A and B tiles), in bytes.
  int smem_bytes_per_stage() const;

  nlohmann::json to_json() const;              // canonical: sorted keys, enum names
  static GemmConfig from_json(const nlohmann::json& j);  // Error naming the field on bad input
  // 12 hex digits of a 64-bit FNV-1a hash of to_json().dump(); used as the kernel symbol prefix fact_<id>_.
  std::string id() const;
  // "sm90 cutlass3 bf16 128x128x64 coop c2x1 persistent" — for logs and reports.
  std::string summary() const;
};

}  // namespace fact::realize
