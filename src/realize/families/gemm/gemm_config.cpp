#include "realize/families/gemm/gemm_config.h"

#include <array>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/enum_names.h"

namespace fact::realize {
namespace {

constexpr std::array<std::pair<KernelApi, const char*>, 2> kApis{{
    {KernelApi::cutlass2_universal, "cutlass2_universal"}, {KernelApi::cutlass3_collective, "cutlass3_collective"}}};
constexpr std::array<std::pair<OpClass, const char*>, 2> kOpClasses{{{OpClass::tensor_op, "tensor_op"}, {OpClass::simt, "simt"}}};
constexpr std::array<std::pair<KernelSchedule, const char*>, 3> kKernelSchedules{{
    {KernelSchedule::none, "none"},
    {KernelSchedule::KernelTmaWarpSpecializedCooperative, "KernelTmaWarpSpecializedCooperative"},
    {KernelSchedule::KernelTmaWarpSpecializedPingpong, "KernelTmaWarpSpecializedPingpong"}}};
constexpr std::array<std::pair<EpilogueSchedule, const char*>, 4> kEpilogueSchedules{{
    {EpilogueSchedule::none, "none"},
    {EpilogueSchedule::TmaWarpSpecializedCooperative, "TmaWarpSpecializedCooperative"},
    {EpilogueSchedule::TmaWarpSpecialized, "TmaWarpSpecialized"},
    {EpilogueSchedule::NoSmemWarpSpecialized, "NoSmemWarpSpecialized"}}};
constexpr std::array<std::pair<TileScheduler, const char*>, 3> kTileSchedulers{{
    {TileScheduler::data_parallel, "data_parallel"}, {TileScheduler::persistent, "persistent"},
    {TileScheduler::stream_k, "stream_k"}}};
constexpr std::array<std::pair<SplitKMode, const char*>, 3> kSplitKModes{{
    {SplitKMode::none, "none"}, {SplitKMode::serial, "serial"}, {SplitKMode::parallel, "parallel"}}};
constexpr std::array<std::pair<MainloopTransform, const char*>, 6> kMainloopTransforms{{
    {MainloopTransform::none, "none"}, {MainloopTransform::split3_tf32, "split3_tf32"},
    {MainloopTransform::kmajor_tf32, "kmajor_tf32"}, {MainloopTransform::transposed, "transposed"},
    {MainloopTransform::split3_rmem, "split3_rmem"}, {MainloopTransform::split3_rmem_a, "split3_rmem_a"}}};

constexpr std::array<std::pair<RasterOrder, const char*>, 3> kRasterOrders{{
    {RasterOrder::heuristic, "heuristic"}, {RasterOrder::along_m, "along_m"}, {RasterOrder::along_n, "along_n"}}};

nlohmann::json shape_json(const GemmShape& s) { return nlohmann::json::array({s.m, s.n, s.k}); }
GemmShape shape_from(const nlohmann::json& j) { return {j.at(0).get<int>(), j.at(1).get<int>(), j.at(2).get<int>()}; }

}  // namespace

std::string to_string(KernelApi v) { return enum_name(kApis, v); }
std::string to_string(OpClass v) { return enum_name(kOpClasses, v); }
std::string to_string(KernelSchedule v) { return enum_name(kKernelSchedules, v); }
std::string to_string(EpilogueSchedule v) { return enum_name(kEpilogueSchedules, v); }
std::string to_string(TileScheduler v) { return enum_name(kTileSchedulers, v); }
std::string to_string(SplitKMode v) { return enum_name(kSplitKModes, v); }
std::string to_string(MainloopTransform v) { return enum_name(kMainloopTransforms, v); }
std::string to_string(RasterOrder v) { return enum_name(kRasterOrders, v); }

GemmConfig GemmConfig::kernel_config() const {
  if (api != KernelApi::cutlass3_collective) return *this;
  GemmConfig k = *this;
  k.swizzle = 1;
  k.raster_order = RasterOrder::heuristic;
  k.split_k_mode = SplitKMode::none;
  k.split_k_slices = 1;
  k.nondeterministic_reduction = false;
  return k;
}

nlohmann::json GemmConfig::run_time_arguments() const {
  if (api != KernelApi::cutlass3_collective) return nlohmann::json::object();
  // FactGemmArgs' codes (data/families/gemm.json): raster 0 heuristic, 1 along M, 2 along N; reduction 1 = any order.
  int raster = raster_order == RasterOrder::along_m ? 1 : raster_order == RasterOrder::along_n ? 2 : 0;
  return {{"swizzle", swizzle}, {"raster", raster}, {"splits", split_k_mode == SplitKMode::none ? 1 : split_k_slices},
          {"reduction", nondeterministic_reduction ? 1 : 0}};
}

std::string GemmConfig::math_operator() const {
  return numerics == Numerics::x3tf32 ? "OpMultiplyAddFastF32" : "OpMultiplyAdd";
}

int GemmConfig::smem_bytes_per_stage() const {
  // split3_rmem's B' tile holds the big and the small words of its k: twice B's width.
  int b_rows = splits_in_registers() ? 2 * threadblock.n : threadblock.n;
  return (threadblock.m + b_rows) * threadblock.k * element_bytes(element_in);
}

nlohmann::json GemmConfig::to_json() const {
  // nlohmann::json objects keep keys sorted, so dump() is canonical.
  nlohmann::json j = {{"arch", to_string(arch)}, {"api", to_string(api)}, {"numerics", to_string(numerics)},
          {"op_class", to_string(op_class)},
          {"layout_a", to_string(layout_a)}, {"layout_b", to_string(layout_b)}, {"layout_d", to_string(layout_d)},
          {"element_in", to_string(element_in)}, {"element_out", to_string(element_out)},
          {"epilogue", epilogue.to_json()},
          {"alignment", {alignment_a, alignment_b, alignment_d}},
          {"threadblock", shape_json(threadblock)}, {"warp", shape_json(warp)},
          {"instruction", shape_json(instruction)}, {"stages", stages}, {"cluster", shape_json(cluster)},
          {"kernel_schedule", to_string(kernel_schedule)}, {"epilogue_schedule", to_string(epilogue_schedule)},
          {"tile_scheduler", to_string(tile_scheduler)}, {"split_k_mode", to_string(split_k_mode)},
          {"split_k_slices", split_k_slices}, {"swizzle", swizzle}};
  if (mainloop_transform != MainloopTransform::none) j["mainloop_transform"] = to_string(mainloop_transform);
  if (nondeterministic_reduction) j["reduction"] = "nondeterministic";  // absent: ids of older records stay
  if (promotion_interval != 0) j["promotion_interval"] = promotion_interval;
  if (raster_order != RasterOrder::heuristic) j["raster_order"] = to_string(raster_order);
  return j;
}

GemmConfig GemmConfig::from_json(const nlohmann::json& j) {
  try {
    GemmConfig c;
    c.arch = arch_from_string(j.at("arch"));
    c.api = parse_enum(kApis, j.at("api"), "GEMM config api");
    c.numerics = numerics_from_string(j.at("numerics"));
    c.op_class = parse_enum(kOpClasses, j.at("op_class"), "GEMM config op_class");
    c.layout_a = matrix_layout_from_string(j.at("layout_a"));
    c.layout_b = matrix_layout_from_string(j.at("layout_b"));
    c.layout_d = matrix_layout_from_string(j.at("layout_d"));
    c.element_in = element_from_string(j.at("element_in"));
    c.element_out = element_from_string(j.at("element_out"));
    c.epilogue = Epilogue::from_json(j.at("epilogue"));
    c.alignment_a = j.at("alignment").at(0);
    c.alignment_b = j.at("alignment").at(1);
    c.alignment_d = j.at("alignment").at(2);
    c.threadblock = shape_from(j.at("threadblock"));
    c.warp = shape_from(j.at("warp"));
    c.instruction = shape_from(j.at("instruction"));
    c.stages = j.at("stages");
    c.cluster = shape_from(j.at("cluster"));
    c.kernel_schedule = parse_enum(kKernelSchedules, j.at("kernel_schedule"), "GEMM config kernel_schedule");
    c.epilogue_schedule = parse_enum(kEpilogueSchedules, j.at("epilogue_schedule"), "GEMM config epilogue_schedule");
    c.tile_scheduler = parse_enum(kTileSchedulers, j.at("tile_scheduler"), "GEMM config tile_scheduler");
    c.split_k_mode = parse_enum(kSplitKModes, j.at("split_k_mode"), "GEMM config split_k_mode");
    c.split_k_slices = j.at("split_k_slices");
    c.swizzle = j.at("swizzle");
    if (j.contains("mainloop_transform"))
      c.mainloop_transform = parse_enum(kMainloopTransforms, j.at("mainloop_transform"), "GEMM config mainloop_transform");
    if (j.contains("promotion_interval")) c.promotion_interval = j.at("promotion_interval");
    if (j.contains("raster_order")) c.raster_order = parse_enum(kRasterOrders, j.at("raster_order"), "GEMM config raster_order");
    if (j.contains("reduction")) {
      std::string r = j.at("reduction");
      if (r != "nondeterministic" && r != "deterministic")
        throw Error("GEMM config field 'reduction': '" + r + "' is not deterministic or nondeterministic");
      c.nondeterministic_reduction = r == "nondeterministic";
    }
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("GEMM config JSON: ") + e.what() + "; expected the fields written by GemmConfig::to_json");
  }
}

std::string GemmConfig::id() const {
  uint64_t h = 14695981039346656037ull;  // FNV-1a: tiny, stable, no dependency
  for (unsigned char ch : to_json().dump()) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return fmt::format("{:012x}", h & 0xffffffffffffull);
}

std::string GemmConfig::summary() const {
  std::string s = fmt::format("{} {} {} {}x{}x{}", to_string(arch),
                              api == KernelApi::cutlass3_collective ? "cutlass3" : "cutlass2",
                              to_string(numerics), threadblock.m, threadblock.n, threadblock.k);
  if (api == KernelApi::cutlass3_collective) {
    s += kernel_schedule == KernelSchedule::KernelTmaWarpSpecializedCooperative ? " coop" : " pingpong";
    s += fmt::format(" c{}x{}", cluster.m, cluster.n);
    if (epilogue_schedule == EpilogueSchedule::NoSmemWarpSpecialized) s += " nosmem-epilogue";
  } else {
    s += fmt::format(" w{}x{} s{}", warp.m, warp.n, stages);
  }
  s += ' ';
  s += to_string(tile_scheduler);
  if (split_k_mode != SplitKMode::none) s += fmt::format(" splitk-{}x{}", to_string(split_k_mode), split_k_slices);
  if (swizzle > 1) s += fmt::format(" swz{}", swizzle);
  if (raster_order != RasterOrder::heuristic) s += " raster-" + to_string(raster_order);
  if (mainloop_transform != MainloopTransform::none) s += " " + to_string(mainloop_transform);
  if (nondeterministic_reduction) s += " nondet-reduce";
  if (promotion_interval != 0) s += " promote-" + std::to_string(promotion_interval);
  return s;
}

}  // namespace fact::realize
