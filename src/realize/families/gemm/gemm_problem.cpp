#include "realize/families/gemm/gemm_problem.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/enum_names.h"

namespace fact::realize {
namespace {

// Largest power of two <= max_elems dividing every value (0 divides nothing away).
int widest_alignment(int max_elems, std::initializer_list<int64_t> values) {
  int64_t g = 0;
  for (int64_t v : values) g = std::gcd(g, v);
  int align = 1;
  while (align * 2 <= max_elems && g % (align * 2) == 0) align *= 2;
  return align;
}

}  // namespace

GemmProblem GemmProblem::packed(int64_t m, int64_t n, int64_t k, int64_t batch, Numerics numerics,
                                Arch arch, bool b_column, Epilogue epilogue) {
  GemmProblem p;
  p.m = m; p.n = n; p.k = k; p.batch = batch;
  p.a = {MatrixLayout::row, k, m * k};
  p.b = b_column ? GemmOperand{MatrixLayout::column, k, k * n} : GemmOperand{MatrixLayout::row, n, k * n};
  p.d = {MatrixLayout::row, n, m * n};
  p.element_in = p.element_out = input_element(numerics);
  p.numerics = numerics;
  p.epilogue = epilogue;
  p.arch = arch;
  return p;
}

GemmOperand GemmProblem::operand_from_strides(const std::vector<int64_t>& shape,
                                              const std::vector<int64_t>& strides, const std::string& name) {
  if (shape.size() < 2 || shape.size() != strides.size() || shape.size() > 3)
    throw Error(fmt::format("{}: expected a 2-D or 3-D tensor with one stride per dim, got {} dims and {} strides",
                            name, shape.size(), strides.size()));
  size_t r = shape.size() - 2, c = shape.size() - 1;
  GemmOperand op;
  // A dim of extent 1 may carry any stride; treat it as packed.
  bool row = strides[c] == 1 || shape[c] == 1;
  bool col = strides[r] == 1 || shape[r] == 1;
  if (row && (!col || strides[r] >= shape[c])) {
    op.layout = MatrixLayout::row;
    op.ld = std::max<int64_t>(strides[r], shape[c]);
  } else if (col) {
    op.layout = MatrixLayout::column;
    op.ld = std::max<int64_t>(strides[c], shape[r]);
  } else {
    throw Error(fmt::format("{}: strides ({}, {}) have no unit stride in the last two dims; "
                            "a GEMM operand must be row- or column-major (call .contiguous() first)",
                            name, strides[r], strides[c]));
  }
  op.batch_stride = shape.size() == 3 ? strides[0] : 0;
  return op;
}

int GemmProblem::alignment_a() const {
  int max = 16 / element_bytes(element_in);
  return widest_alignment(max, {a.ld, a.layout == MatrixLayout::row ? k : m, batch > 1 ? a.batch_stride : 0});
}
int GemmProblem::alignment_b() const {
  int max = 16 / element_bytes(element_in);
  return widest_alignment(max, {b.ld, b.layout == MatrixLayout::row ? n : k, batch > 1 ? b.batch_stride : 0});
}
int GemmProblem::alignment_d() const {
  int max = 16 / element_bytes(element_out);
  return widest_alignment(max, {d.ld, d.layout == MatrixLayout::row ? n : m, batch > 1 ? d.batch_stride : 0});
}

void GemmProblem::validate() const {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0)
    throw Error(fmt::format("GEMM problem {}x{}x{} batch {}: every extent must be positive", m, n, k, batch));
  auto check_ld = [](const GemmOperand& op, int64_t rows, int64_t cols, const char* name) {
    int64_t need = op.layout == MatrixLayout::row ? cols : rows;
    if (op.ld < need)
      throw Error(fmt::format("GEMM operand {} ({} x {}, {}-major): ld {} is below {}; fix the strides",
                              name, rows, cols, to_string(op.layout), op.ld, need));
  };
  check_ld(a, m, k, "A");
  check_ld(b, k, n, "B");
  check_ld(d, m, n, "D");
  if (element_in != input_element(numerics))
    throw Error(fmt::format("GEMM numerics {} takes {} inputs, not {}: convert the inputs or pick another mode",
                            to_string(numerics), to_string(input_element(numerics)), to_string(element_in)));
  if (element_out != element_in)
    throw Error(fmt::format("GEMM output {} differs from input {}: FACT kernels return the input type",
                            to_string(element_out), to_string(element_in)));
}

std::string GemmProblem::workload_key() const {
  auto l = [](const GemmOperand& o) { return to_string(o.layout).substr(0, 1); };
  // A constant B is timed with its pre-pass copy kept: another measurement, so another key.
  return fmt::format("gemm_m{}_n{}_k{}_b{}_{}{}{}{}_{}_{}_{}", m, n, k, batch, l(a), l(b), l(d), b.constant ? "_wb" : "",
                     to_string(numerics), to_string(epilogue), to_string(arch));
}

nlohmann::json GemmProblem::to_json() const {
  auto op = [](const GemmOperand& o) {
    nlohmann::json j{{"layout", to_string(o.layout)}, {"ld", o.ld}, {"batch_stride", o.batch_stride}};
    if (o.constant) j["constant"] = true;
    return j;
  };
  return {{"m", m}, {"n", n}, {"k", k}, {"batch", batch}, {"a", op(a)}, {"b", op(b)}, {"d", op(d)},
          {"element_in", to_string(element_in)}, {"element_out", to_string(element_out)},
          {"numerics", to_string(numerics)}, {"epilogue", epilogue.to_json()}, {"arch", to_string(arch)}};
}

GemmProblem GemmProblem::from_json(const nlohmann::json& j) {
  try {
    auto op = [](const nlohmann::json& o) {
      return GemmOperand{matrix_layout_from_string(o.at("layout")), o.at("ld"), o.value("batch_stride", int64_t{0}),
                         o.value("constant", false)};
    };
    GemmProblem p;
    p.m = j.at("m"); p.n = j.at("n"); p.k = j.at("k"); p.batch = j.value("batch", int64_t{1});
    p.a = op(j.at("a")); p.b = op(j.at("b")); p.d = op(j.at("d"));
    p.element_in = element_from_string(j.at("element_in"));
    p.element_out = element_from_string(j.at("element_out"));
    p.numerics = numerics_from_string(j.at("numerics"));
    if (j.contains("epilogue")) p.epilogue = Epilogue::from_json(j.at("epilogue"));
    p.arch = arch_from_string(j.at("arch"));
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("GEMM problem JSON: ") + e.what() + "; expected the fields written by GemmProblem::to_json");
  }
}

}  // namespace fact::realize
