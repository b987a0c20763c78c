#pragma once
// One GEMM-family workload as the realize stage sees it: shapes, operand layouts, dtypes, numerics,
// epilogue and target arch. Plain values; the config space and code generator read nothing else.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/vocabulary.h"
#include "realize/families/gemm/gemm_epilogue.h"

namespace fact::realize {

struct GemmOperand {
  MatrixLayout layout = MatrixLayout::row;
  int64_t ld = 0;            // leading dimension in elements
  int64_t batch_stride = 0;  // elements between batches; 0 when shared across the batch
  // Module state (a weight): the same values every call, so a kernel's pre-pass copy of it may be kept
  // between calls and the tuner times the kernel with it kept.
  bool constant = false;
};

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  GemmOperand a, b, d;
  Element element_in = Element::f32;
  Element element_out = Element::f32;
  Numerics numerics = Numerics::fp32;
  Epilogue epilogue;  // default: the predefined "none" (alpha * acc + beta * C)
  Arch arch = Arch::sm90;

  // A packed problem: row-major A and D, B row-major ("nn") or column-major (a Linear weight,
  // `b_column`); element types follow the numerics mode.
  static GemmProblem packed(int64_t m, int64_t n, int64_t k, int64_t batch, Numerics numerics,
                            Arch arch, bool b_column = false, Epilogue epilogue = {});
  // Layout and ld of one operand from a graph tensor's last two dims (rows x cols) and strides.
  // `name` is used in errors ("A of aten.mm node mm_1").
  static GemmOperand operand_from_strides(const std::vector<int64_t>& shape,
                                          const std::vector<int64_t>& strides, const std::string& name);

  // Widest vector access (elements, power of two, at most 16 bytes) that every row/column start of
  // the operand keeps: it must divide ld, the contiguous extent and the batch stride.
  int alignment_a() const;
  int alignment_b() const;
  int alignment_d() const;

  // Throws Error naming the field when shapes, lds or element types are inconsistent.
  void validate() const;
  // Key for tuning records: shape, layouts, numerics, epilogue, arch.
  std::string workload_key() const;
  nlohmann::json to_json() const;
  static GemmProblem from_json(const nlohmann::json& j);
};

}  // namespace fact::realize
