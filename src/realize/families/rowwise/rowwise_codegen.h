#pragma once
// CUDA for a row program (discover/row_program.h), rendered into templates/rowwise/generated_kernel.cu.in:
// (a) no reduction: a flat grid-stride kernel over all elements, 16-byte accesses; (b) with reductions: a CTA
// (or, short rows, a warp or a few of its lanes) per row, one pass with the row in registers when it fits (in shared
// memory when only that holds it: a long row over a cluster's CTAs), else one pass over
// global memory per reduction level (softmax's max and sum are one online level) and one to write; on sm90 a
// cluster of CTAs may share a row (distributed shared memory combines their partials). (c) strided rows (the
// reduced dims have others behind them): a thread per row, or `split` threads sharing one, adjacent threads on
// adjacent rows so that every access of a warp is one coalesced run. (d) a scan (cumsum, cumprod): a CTA per row
// walks the row's tiles in order, each tile one block-wide scan (shuffles, then the warps' totals through shared
// memory), the prefix carried to the next tile.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/arch_spec.h"
#include "discover/row_program.h"

namespace fact::realize {

struct RowwiseKernelConfig {
  int threads = 256;          // per CTA
  int vec = 4;                // elements per access (16 bytes at most)
  bool warp_per_row = false;  // rows with reductions: a warp (or part of one) per row instead of a CTA
  bool one_pass = false;      // rows with reductions: the row held in registers (or shared memory: smem_row)
  bool smem_row = false;      // with one_pass: the row staged in shared memory, for rows too long for registers
  int cluster = 1;            // rows with reductions: CTAs per row (an sm90 thread-block cluster)
  int split = 1;              // strided rows: threads sharing a row (each takes every split-th element)
  int row_lanes = 32;         // with warp_per_row: lanes per row (short rows share a warp: 2 to 16)
  int items = 1;              // scans: accesses of vec elements per thread in one tile (loaded together)
  nlohmann::json to_json() const;
  static RowwiseKernelConfig from_json(const nlohmann::json& j);
  std::string text() const;
};

// The configs of data/families/rowwise.json's space that can run the program, likely best first.
std::vector<RowwiseKernelConfig> rowwise_kernel_configs(const discover::RowProgram& p, const nlohmann::json& space,
                                                        const ArchSpec& arch);

// Whether the kernel takes a full input whose rows lie a row stride (>= cols) apart: one of contiguous rows, each row
// indexed from its start (not the flat kernel, which walks one array, nor strided rows).
bool takes_row_stride(const discover::RowProgram& p);

// The kernel source exporting fact_<config_id>_{can_implement,run,describe} (FactRowwiseArgs ABI).
std::string render_rowwise_kernel(const discover::RowProgram& p, const RowwiseKernelConfig& c,
                                  const std::string& config_id, const std::string& summary);

}  // namespace fact::realize
