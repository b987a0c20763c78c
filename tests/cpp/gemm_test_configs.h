#pragma once
// Hand-picked GEMM configs that the codegen and op-library tests share: one per kernel family.
#include "realize/families/gemm/gemm_config.h"

namespace fact::realize::test {

inline GemmConfig sm90_bf16_cooperative() {
  GemmConfig c;  // defaults: sm90 cutlass3 bf16, A row, B column (K-major), D row
  c.threadblock = {128, 128, 64};
  c.warp = {64, 128, 64};
  c.instruction = {64, 128, 16};
  c.stages = 0;
  c.cluster = {2, 1, 1};
  c.kernel_schedule = KernelSchedule::KernelTmaWarpSpecializedCooperative;
  c.epilogue_schedule = EpilogueSchedule::TmaWarpSpecializedCooperative;
  c.tile_scheduler = TileScheduler::persistent;
  return c;
}

inline GemmConfig sm80_3xtf32(Epilogue epilogue = Epilogue::named("none")) {
  GemmConfig c;
  c.arch = Arch::sm80;
  c.api = KernelApi::cutlass2_universal;
  c.numerics = Numerics::x3tf32;
  c.element_in = c.element_out = Element::f32;
  c.layout_b = MatrixLayout::row;
  c.alignment_a = c.alignment_b = c.alignment_d = 4;
  c.threadblock = {128, 128, 16};
  c.warp = {64, 64, 16};
  c.instruction = {16, 8, 8};
  c.stages = 4;
  c.tile_scheduler = TileScheduler::data_parallel;
  c.epilogue = epilogue;
  return c;
}

}  // namespace fact::realize::test
