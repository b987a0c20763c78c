#include "realize/families/rowwise/rowwise_codegen.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "core/error.h"
#include "realize/template_renderer.h"

namespace fact::realize {
using discover::RowProgram;
using discover::RowStatement;
using nlohmann::json;

namespace {

int element_bytes(const std::string& dtype) { return dtype == "float32" ? 4 : 2; }
const char* element_type(const std::string& dtype) {
  return dtype == "float32" ? "float" : dtype == "bfloat16" ? "__nv_bfloat16" : "__half";
}

// The vars an expression reads.
std::vector<std::string> vars_of(const std::string& expr) {
  static const std::regex ident(R"(\bv\d+(_m|_s|_v)?\b)");
  std::vector<std::string> out;
  for (std::sregex_iterator it(expr.begin(), expr.end(), ident), end; it != end; ++it) out.push_back(it->str());
  return out;
}

// The reduction level of every var: how many reductions (in sequence) its value needs.
std::map<std::string, int> levels(const RowProgram& p) {
  std::map<std::string, int> lv;
  for (const auto& s : p.statements) {
    if (s.kind == RowStatement::Kind::load) {
      lv[s.var] = 0;
    } else if (s.kind == RowStatement::Kind::scan) {
      lv[s.var] = lv.at(s.operand) + 1;
    } else if (s.kind == RowStatement::Kind::reduce) {
      int l = lv.at(s.operand) + 1;
      lv[s.var] = lv[s.var + "_m"] = lv[s.var + "_s"] = lv[s.var + "_v"] = l;
    } else {
      int l = 0;
      for (const auto& v : vars_of(s.expr)) l = std::max(l, lv.at(v));
      lv[s.var] = l;
    }
  }
  return lv;
}

struct KernelWriter {
  KernelWriter(const RowProgram& program, const RowwiseKernelConfig& config) : p(program), c(config), lv(levels(program)) {}
  const RowProgram& p;
  const RowwiseKernelConfig& c;
  std::map<std::string, int> lv;
  std::string out;

  void line(const std::string& indent, const std::string& s) { out += indent + s + "\n"; }

  // The per-element statements of level <= max_level, reading loaded element e of item k. In a one-pass row held in
  // registers, a value a later sweep reads is kept there (c_<var>[k][e]) rather than computed again: level2's scaled
  // swish before its absmax otherwise took its expf and division twice an element.
  void element_body(const std::string& ind, int max_level, const std::string& load_index) {
    for (const auto& s : p.statements) {
      if (s.per_row || lv.at(s.var) > max_level) continue;
      if (s.kind == RowStatement::Kind::load) {
        line(ind, fmt::format("const float {} = l{}{};", s.var, s.input, load_index));
      } else if (s.kind == RowStatement::Kind::expr && kept.count(s.var)) {
        line(ind, fmt::format("const float {0} = c_{0}{1};", s.var, load_index));
      } else if (s.kind == RowStatement::Kind::expr && keeps_values && lv.at(s.var) < max_level) {
        continue;  // an earlier level's value that no later level reads (the kept ones cover what this sweep reads)
      } else if (s.kind == RowStatement::Kind::expr) {
        line(ind, fmt::format("const float {} = {};", s.var, s.expr));
        if (keeping.count(s.var)) line(ind, fmt::format("c_{0}{1} = {0};", s.var, load_index));
      } else if (s.kind == RowStatement::Kind::scan) {
        line(ind, fmt::format("const float {} = sc{};", s.var, load_index));
      }
    }
    kept.insert(keeping.begin(), keeping.end());
    keeping.clear();
  }
  // Values kept in registers for later sweeps (element_body): those this sweep computes, those earlier ones did.
  bool keeps_values = false;
  std::set<std::string> keeping, kept;
  // Before a sweep of level `level` of a one-pass row in registers: declares the arrays of the values it computes that
  // a later level reads.
  void keep_for_later(int level) {
    if (!keeps_values) return;
    const int top = top_level();
    for (const auto& s : p.statements) {
      if (s.per_row || s.kind != RowStatement::Kind::expr || lv.at(s.var) > level || kept.count(s.var)) continue;
      const auto reads = [&](const std::string& expr) {
        const auto v = vars_of(expr);
        return std::find(v.begin(), v.end(), s.var) != v.end();
      };
      bool later = lv.at(s.var) < top && reads(p.output);
      for (const auto& t : p.statements)
        later = later || (lv.at(t.var) > lv.at(s.var) && !t.per_row && reads(t.expr));  // (a reduction reads its own level)
      if (!later) continue;
      line("  ", fmt::format("float c_{}[kItems][V];", s.var));
      keeping.insert(s.var);
    }
  }
  int top_level() const {
    int l = 0;
    for (const auto& [v, x] : lv) l = std::max(l, x);
    return l;
  }
  bool strided() const { return p.inner > 1; }
  // An input's element type: the kernel's, bool (a mask read as 1 or 0) or int64 (a gather's index).
  const char* in_type(size_t i) const { return p.boolean[i] ? "bool" : p.index[i] ? "int64_t" : "Element"; }
  // One value per row: read once where the row starts, never in a sweep.
  bool per_row(size_t i) const { return p.inputs[i] == discover::RowInputKind::per_row; }
  // Threads past the last row redo a live row and must not store (strided rows, rows sharing a warp).
  bool guarded() const { return strided() || c.warp_per_row; }
  bool shared_row(size_t i) const { return p.inputs[i] == discover::RowInputKind::row_broadcast; }
  bool channel(size_t i) const { return p.inputs[i] == discover::RowInputKind::channel; }
  bool window(size_t i) const { return p.inputs[i] == discover::RowInputKind::window; }
  // Read element by element at the element's index in the full tensor: channel and window inputs.
  bool by_element(size_t i) const { return channel(i) || window(i); }
  // Element `flat` (of the flattened full tensor) of input i: its channel's value, or its window's pool.
  std::string element_value(size_t i, const std::string& flat) const {
    if (window(i)) return fmt::format("window{0}(in{0}, {1})", i, flat);
    return fmt::format("to_float(in{}[(({}) / {}) % {}])", i, flat, p.channel[i].inner, p.channel[i].channels);
  }
  // The flat index of element `col` of this thread's row.
  std::string flat_of(const std::string& col) const {
    return strided() ? fmt::format("first + ({}) * kInner", col) : "row * kCols + " + col;
  }
  // One access's loads of input i: V elements from column `col` of the row (channel inputs element by element; a window
  // input's V consecutive elements of a contiguous row as one run).
  std::string load_line(size_t i, const std::string& col, const std::string& dst) const {
    if (window(i) && !strided()) return fmt::format("window{0}_run<V>(in{0}, {1}, {2});", i, flat_of(col), dst);
    if (by_element(i))
      return fmt::format("for (int e = 0; e < V; ++e) {}[e] = {};", dst, element_value(i, flat_of(col + " + e")));
    return fmt::format("load<V>(in{}, {}, {});", i, at(col, static_cast<int>(i)), dst);
  }

  // Window input i's pool (templates/rowwise/window_pool.cu.in): the pooled dims padded to three (size 1, window 1).
  void window_function(size_t i) {
    const discover::WindowRead& w = p.window[i];
    const size_t pad = 3 - w.in.size();
    auto dims = [&](const std::vector<int64_t>& v, int64_t fill) {
      std::vector<int64_t> r(pad, fill);
      r.insert(r.end(), v.begin(), v.end());
      return fmt::format("{}", fmt::join(r, ", "));
    };
    const int mode = w.form == "max" ? 0 : w.divisor ? 3 : w.count_include_pad ? 1 : 2;
    out += render_template_file(
        "rowwise/window_pool.cu.in",
        {{"summary", fmt::format("{} pool of input {}: window {}, stride {}, padding {}, dilation {}; [..{}] -> [..{}]",
                                 w.form, i, fmt::join(w.kernel, "x"), fmt::join(w.stride, "x"), fmt::join(w.padding, "x"),
                                 fmt::join(w.dilation, "x"), fmt::join(w.in, ","), fmt::join(w.out, ","))},
         {"input", std::to_string(i)},
         {"mode", std::to_string(mode)},
         {"divisor", fmt::format("{}.0f", w.divisor ? w.divisor : 1)},
         {"in", dims(w.in, 1)},
         {"out", dims(w.out, 1)},
         {"kernel", dims(w.kernel, 1)},
         {"stride", dims(w.stride, 1)},
         {"padding", dims(w.padding, 0)},
         {"dilation", dims(w.dilation, 1)}});
    out += "\n";
  }
  // Where element `col` of a row is, from the row's first element (a shared row's elements are contiguous).
  std::string at(const std::string& col, int input = -1) const {
    return strided() && (input < 0 || !shared_row(input)) ? col + " * kInner" : col;
  }

  // Loads of every input for one access of V elements at column `col` (row pointers in_i).
  void loads(const std::string& ind, const std::string& suffix, const std::string& col) {
    for (size_t i = 0; i < p.inputs.size(); ++i)
      if (!per_row(i)) line(ind, load_line(i, col, fmt::format("l{}{}", i, suffix)));
  }

  // Each input's and the output's pointer at contiguous row `row` (a per-row input's value at it).
  void row_pointers() {
    for (size_t i = 0; i < p.inputs.size(); ++i)
      line("  ", fmt::format("const {1}* in{0} = static_cast<const {1}*>(a.inputs[{0}]) + row{2};", i, in_type(i),
                             per_row(i) ? "" : fmt::format(" * a.input_row_stride[{}]", i)));
    line("  ", "Element* out = static_cast<Element*>(a.output) + row * a.output_row_stride;");
  }

  // The per-row inputs' values at the row (their pointers at it): an index checked against the row's length (an index
  // outside it stops the kernel, as PyTorch's gather does by a device assert), any other converted to float.
  void row_inputs() {
    for (const auto& s : p.statements) {
      if (s.kind != RowStatement::Kind::load || !per_row(static_cast<size_t>(s.input))) continue;
      if (p.index[s.input]) {
        line("  ", fmt::format("const int64_t ix{0} = in{0}[0];", s.input));
        line("  ", fmt::format("if (ix{0} < 0 || ix{0} >= kCols) {{ printf(\"fact: gather index %lld of row %lld is outside "
                               "[0, %lld)\\n\", (long long)ix{0}, (long long)row, (long long)kCols); __trap(); }}", s.input));
      } else {
        line("  ", fmt::format("const float {} = to_float(in{}[0]);", s.var, s.input));
      }
      row_loaded.insert(s.var);
    }
  }

  // A flat kernel without a broadcast row takes any row length (the verifier runs odd element counts).
  bool any_cols() const {
    return std::all_of(p.inputs.begin(), p.inputs.end(), [](auto k) { return k == discover::RowInputKind::full; });
  }

  // One access of V elements at flat index i: loads, the element statements, the store.
  void flat_access(const std::string& ind, const std::string& v) {
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      if (window(i)) {
        line(ind, fmt::format("float l{0}[{1}];", i, v));
        line(ind, fmt::format("window{0}_run<{1}>(in{0}, i, l{0});", i, v));
        continue;
      }
      if (by_element(i)) {
        line(ind, fmt::format("float l{0}[{1}];", i, v));
        line(ind, "#pragma unroll");
        line(ind, fmt::format("for (int e = 0; e < {1}; ++e) l{0}[e] = {2};", i, v, element_value(i, "i + e")));
        continue;
      }
      if (shared_row(i) && strided()) {
        // A row of strided rows ([C, 1, 1] over [N, C, H, W]): element i takes the row's element (i / inner) % C.
        line(ind, fmt::format("float l{0}[{1}];", i, v));
        line(ind, "#pragma unroll");
        line(ind, fmt::format("for (int e = 0; e < {1}; ++e) l{0}[e] = to_float(in{0}[((i + e) / kInner) % kCols]);", i, v));
        continue;
      }
      line(ind, fmt::format("float l{0}[{2}];\n{3}load<{2}>(in{0}, {1}, l{0});", i, shared_row(i) ? "i % a.cols" : "i", v, ind));
    }
    line(ind, fmt::format("float y[{}];", v));
    line(ind, "#pragma unroll");
    line(ind, fmt::format("for (int e = 0; e < {}; ++e) {{", v));
    element_body(ind + "  ", 0, "[e]");
    line(ind + "  ", fmt::format("y[e] = {};", p.output));
    line(ind, "}");
    line(ind, fmt::format("store<{}>(out, i, y);", v));
  }

  void flat() {
    line("", "template <int V>");
    line("", "__global__ void __launch_bounds__(kThreads) flat_kernel(const FactRowwiseArgs a) {");
    for (size_t i = 0; i < p.inputs.size(); ++i)
      line("  ", fmt::format("const {1}* in{0} = static_cast<const {1}*>(a.inputs[{0}]);", i, in_type(i)));
    line("  ", "Element* out = static_cast<Element*>(a.output);");
    line("  ", "const int64_t n = a.rows * a.cols, chunks = n / V;");
    line("  ", "for (int64_t c = int64_t(blockIdx.x) * kThreads + threadIdx.x; c < chunks; c += int64_t(gridDim.x) * kThreads) {");
    line("    ", "const int64_t i = c * V;");
    flat_access("    ", "V");
    line("  ", "}");
    line("  ", "// The last n % V elements (fewer than a vector): one thread each.");
    line("  ", "if (blockIdx.x == 0 && threadIdx.x < n - chunks * V) {");
    line("    ", "const int64_t i = chunks * V + threadIdx.x;");
    flat_access("    ", "1");
    line("  ", "}");
    line("", "}");
  }

  // One sweep over the row: per element, the statements up to `level`, then `body` (accumulate or store); per
  // access of V elements, `before` ahead of them and `after` behind them.
  void sweep(int level, const std::vector<std::string>& body_lines, bool store, const std::vector<std::string>& before = {},
             const std::vector<std::string>& after = {}) {
    if (c.one_pass) {
      keep_for_later(level);
      line("  ", "#pragma unroll");
      line("  ", "for (int k = 0; k < kItems; ++k) {");
      line("    ", "const int64_t col0 = (int64_t(k) * kLanes + lane) * V;");
      line("    ", "if (col0 >= kCols) continue;");
    } else {
      // Strided rows: a thread's loads are independent; unrolled, several are in flight at once.
      if (strided()) line("  ", "#pragma unroll 4");
      line("  ", "for (int64_t col0 = int64_t(lane) * V; col0 < kCols; col0 += int64_t(kLanes) * V) {");
      for (size_t i = 0; i < p.inputs.size(); ++i)
        if (!per_row(i)) line("    ", fmt::format("float l{}[V];", i));
      loads("    ", "", "col0");
    }
    if (store) line("    ", "float y[V];");
    for (const auto& b : before) line("    ", b);
    line("    ", "#pragma unroll");
    line("    ", "for (int e = 0; e < V; ++e) {");
    element_body("      ", level, c.one_pass ? "[k][e]" : "[e]");
    for (const auto& b : body_lines) line("      ", b);
    line("    ", "}");
    for (const auto& b : after) line("    ", b);
    if (store) line("    ", fmt::format("{}store<V>(out, {}, y);", guarded() ? "if (live) " : "", at("col0")));
    line("  ", "}");
  }

  // A second sweep over a row held in registers, after the first made each reduction's `_m`: sums `term` (fmt
  // arguments: the reduction's var, its operand) into `<var>_<suffix>`, `scale` appended to the reduced sum.
  void second_sum(int level, const std::vector<const RowStatement*>& reds, const std::string& suffix,
                  const std::string& term, const std::string& scale) {
    if (reds.empty()) return;
    std::vector<std::string> acc;
    for (const auto* r : reds) {
      line("  ", fmt::format("float a_{}_{} = 0.0f;", r->var, suffix));
      acc.push_back(fmt::format("a_{}_{} += {};", r->var, suffix, fmt::format(fmt::runtime(term), r->var, r->operand)));
    }
    sweep(level, acc, false);
    for (const auto* r : reds)
      line("  ", fmt::format("const float {0}_{1} = row_reduce(a_{0}_{1}, OpSum{{}}, smem_f){2};", r->var, suffix, scale));
  }

  void row_values(int level) {
    for (const auto& s : p.statements)
      if (s.kind == RowStatement::Kind::expr && s.per_row && lv.at(s.var) == level) {
        row_loads(s.expr);
        line("  ", fmt::format("const float {} = {};", s.var, s.expr));
      }
  }
  // A per-row value that reads an input's element: a per-channel vector over rows that lie in one channel (a bias
  // added after a mean over H x W), read once at the row's first element. Other inputs vary along the row.
  std::set<std::string> row_loaded;
  void row_loads(const std::string& expr) {
    static const std::regex ident(R"(\bv\d+\b)");
    for (std::sregex_iterator it(expr.begin(), expr.end(), ident), end; it != end; ++it) {
      const std::string v = it->str();
      auto s = std::find_if(p.statements.begin(), p.statements.end(), [&](const RowStatement& st) {
        return st.var == v && st.kind == RowStatement::Kind::load;
      });
      if (s == p.statements.end() || s->per_row || !row_loaded.insert(v).second) continue;
      const size_t i = static_cast<size_t>(s->input);
      if (!channel(i))
        throw Error(fmt::format("row-wise program: a per-row value reads {} (input {}), which varies along the row", v, i));
      line("  ", fmt::format("const float {} = {};", v, element_value(i, flat_of("0"))));
    }
  }

  // 1 for the exclusive form of a scan with a pad before its row, else 0. An inclusive scan written pad_lo columns in
  // is the exclusive scan of the same row written from column pad_lo - 1 (its column c: op over the columns before c),
  // which keeps 16-byte stores aligned where the pad alone would not (cat(zeros, cumsum(narrow(x))): a pad of 1). Only
  // where nothing after the scan reads an element of the row, and every input is read forward at the row's column.
  int scan_shift() const {
    const int vec = 16 / element_bytes(p.dtype);
    if (!p.scan() || p.pad_lo < 1 || p.output_reversed || (p.pad_lo - 1) % vec != 0 || (p.cols + 1) % vec != 0) return 0;
    for (size_t i = 0; i < p.inputs.size(); ++i)
      if (p.reversed[i] || (p.inputs[i] != discover::RowInputKind::full && !shared_row(i))) return 0;
    const int top = lv.at(p.scan()->var);
    if (lv.at(p.output) < top) return 0;
    for (const auto& s : p.statements)
      if (s.kind == RowStatement::Kind::expr && lv.at(s.var) >= top)
        for (const auto& v : vars_of(s.expr))
          if (lv.at(v) < top) return 0;
    return 1;
  }

  // A scan along contiguous rows: a CTA per row walks its tiles in order (kItems accesses of V elements a thread,
  // loaded together); the ops before the scan run where the tile is loaded, those after it where it is stored.
  void scan_rows() {
    const RowStatement& scan = *p.scan();
    const bool sum = scan.reduce == "sum";
    line("", "template <int V>");
    line("", "__global__ void __launch_bounds__(kThreads) scan_kernel(const FactRowwiseArgs a) {");
    // A CTA per row, or (short rows) a warp per row, which scans by shuffles alone and so may leave on its own.
    line("  ", "constexpr int kRowThreads = kWarpPerRow ? 32 : kThreads;");
    line("  ", "const int t = kWarpPerRow ? int(threadIdx.x % 32) : int(threadIdx.x);");
    line("  ", "__shared__ float smem_scan[kItems * (kThreads / 32) + 1];");
    line("  ", "const int64_t row = kWarpPerRow ? int64_t(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32 : int64_t(blockIdx.x);");
    line("  ", "if (row >= a.rows) return;  // uniform over the CTA (a warp per row: over the warp)");
    row_pointers();
    row_values(0);
    const int shift = scan_shift();
    if (p.padded()) {
      // Pad columns: [0, before) and the pad_hi after the row's values; the exclusive form writes the last before them.
      const int64_t before = p.pad_lo - shift;
      if (before + p.pad_hi > 0)
        line("  ", fmt::format("for (int64_t c = t; c < {0} + {1}; c += kRowThreads) out[c < {0} ? c : kCols + {2} + c] = "
                               "from_float<Element>({3});  // the row's pads", before, p.pad_hi, shift, p.pad_value));
      if (before) line("  ", fmt::format("out += {};", before));
    }
    line("  ", fmt::format("float carry = {};", sum ? "0.0f" : "1.0f"));
    const std::string scan_cols = shift ? fmt::format("kCols + {}", shift) : "kCols";
    line("  ", fmt::format("for (int64_t base = 0; base < {}; base += int64_t(kRowThreads) * V * kItems) {{", scan_cols));
    for (size_t i = 0; i < p.inputs.size(); ++i) line("    ", fmt::format("float l{}[kItems][V];", i));
    line("    ", "float sc[kItems][V];");
    line("    ", "#pragma unroll");
    line("    ", "for (int k = 0; k < kItems; ++k) {");
    line("      ", "const int64_t col0 = base + (int64_t(k) * kRowThreads + t) * V;");
    // Past the row's end: zeros, which come after every element of the row in the tile's order (never in its prefix).
    // A flipped input is read from the row's end: its V elements reversed (kCols is a multiple of V, so aligned).
    // The exclusive form walks one column past the row: the access over the row's end loads element by element.
    for (size_t i = 0; i < p.inputs.size(); ++i)
      line("      ", fmt::format("if (col0 {2} kCols) {{ {1} }} else for (int e = 0; e < V; ++e) l{0}[k][e] = {3};", i,
                                 p.reversed[i] ? fmt::format("float r[V]; load<V>(in{0}, kCols - col0 - V, r); for (int e = 0; "
                                                             "e < V; ++e) l{0}[k][e] = r[V - 1 - e];", i)
                                               : load_line(i, "col0", fmt::format("l{}[k]", i)),
                                 shift ? "+ V <=" : "<",
                                 shift ? fmt::format("col0 + e < kCols ? to_float(in{}[col0 + e]) : 0.0f", i) : "0.0f"));
    line("      ", "#pragma unroll");
    line("      ", "for (int e = 0; e < V; ++e) {");
    element_body("        ", 0, "[k][e]");
    line("        ", fmt::format("sc[k][e] = {};", scan.operand));
    line("      ", "}");
    line("    ", "}");
    line("    ", fmt::format("if constexpr (kWarpPerRow) warp_tile_scan<V, {1}>(sc, carry, {0});\n    else tile_scan<V, {1}>(sc, carry, {0}, smem_scan);",
                           sum ? "OpSum{}, 0.0f" : "OpProd{}, 1.0f", shift ? "true" : "false"));
    line("    ", "#pragma unroll");
    line("    ", "for (int k = 0; k < kItems; ++k) {");
    line("      ", "const int64_t col0 = base + (int64_t(k) * kRowThreads + t) * V;");
    line("      ", fmt::format("if (col0 >= {}) continue;", scan_cols));
    line("      ", "float y[V];");
    line("      ", "#pragma unroll");
    line("      ", "for (int e = 0; e < V; ++e) {");
    int max_level = 0;
    for (const auto& [v, l] : lv) max_level = std::max(max_level, l);
    element_body("        ", max_level, "[k][e]");
    line("        ", fmt::format("y[e] = {};", p.output));
    line("      ", "}");
    if (shift) line("      ", fmt::format("if (col0 == 0) y[0] = {};  // a pad column, the exclusive form's first", p.pad_value));
    if (p.output_reversed) {
      line("      ", "float z[V];  // written from the row's end");
      line("      ", "for (int e = 0; e < V; ++e) z[e] = y[V - 1 - e];");
      line("      ", "store<V>(out, kCols - col0 - V, z);");
    } else {
      line("      ", "store<V>(out, col0, y);");
    }
    line("    ", "}");
    line("  ", "}");
    line("", "}");
  }

  void rows() {
    const int max_level = top_level();
    keeps_values = c.one_pass && !c.smem_row;
    line("", "template <int V>");
    if (strided()) {
      // kThreads / kSplit adjacent rows per CTA (adjacent positions behind the reduced dims); the last tile's
      // spare threads redo the last row and write nothing (every thread takes part in the reductions' barriers).
      line("", "__global__ void __launch_bounds__(kThreads) row_kernel(const FactRowwiseArgs a) {");
      line("  ", "constexpr int kRowsPerCta = kThreads / kSplit;");
      line("  ", "constexpr int64_t kTiles = (kInner + kRowsPerCta - 1) / kRowsPerCta;");
      line("  ", "const int64_t outer = int64_t(blockIdx.x) / kTiles;");
      line("  ", "const int64_t pos = (int64_t(blockIdx.x) % kTiles) * kRowsPerCta + threadIdx.x % kRowsPerCta;");
      line("  ", "const bool live = pos < kInner;");
      line("  ", "const int64_t row = outer * kInner + (live ? pos : kInner - 1);");
      line("  ", "const int lane = int(threadIdx.x) / kRowsPerCta;");
      line("  ", "__shared__ float smem_f[kThreads];");
      line("  ", "__shared__ MaxSumExp smem_ms[kThreads];");
      line("  ", "__shared__ MeanM2 smem_mv[kThreads];");
      line("  ", "if (row >= a.rows) return;  // uniform over the CTA (rows is a multiple of kInner)");
      line("  ", "const int64_t first = outer * kCols * kInner + (row - outer * kInner);  // the row's first element");
      for (size_t i = 0; i < p.inputs.size(); ++i)
        line("  ", fmt::format("const {2}* in{0} = static_cast<const {2}*>(a.inputs[{0}]){1};", i,
                               per_row(i) ? " + row" : p.inputs[i] != discover::RowInputKind::full ? "" : " + first", in_type(i)));
      line("  ", fmt::format("Element* out = static_cast<Element*>(a.output) + {};", p.output_per_row ? "row" : "first"));
    } else if (c.cluster > 1) {
      // A cluster of CTAs per row: lanes count across the cluster, so every sweep below strides over all of them.
      line("", "__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads) row_kernel(const FactRowwiseArgs a) {");
      line("  ", "const int64_t row = int64_t(blockIdx.x) / kCluster;");
      line("  ", "const int lane = int(cooperative_groups::this_cluster().block_rank()) * kThreads + int(threadIdx.x);");
    } else {
      line("", "__global__ void __launch_bounds__(kThreads) row_kernel(const FactRowwiseArgs a) {");
      line("  ", "const int lane = kWarpPerRow ? int(threadIdx.x % kRowLanes) : int(threadIdx.x);");
      if (c.warp_per_row) {
        // Rows sharing a warp: the lanes past the last row redo it and write nothing (every lane of the warp
        // takes part in its shuffles).
        line("  ", "const int64_t row_index = int64_t(blockIdx.x) * (kThreads / kRowLanes) + threadIdx.x / kRowLanes;");
        line("  ", "const bool live = row_index < a.rows;");
        line("  ", "const int64_t row = live ? row_index : a.rows - 1;");
      } else {
        line("  ", "const int64_t row = int64_t(blockIdx.x);");
      }
    }
    if (!strided()) {
      line("  ", "__shared__ float smem_f[32];");
      line("  ", "__shared__ MaxSumExp smem_ms[32];");
      line("  ", "__shared__ MeanM2 smem_mv[32];");
      if (!c.warp_per_row) line("  ", "if (row >= a.rows) return;  // uniform over the CTA");
      row_pointers();
    }
    if (c.one_pass) {
      line("  ", "constexpr int kItems = int((kCols + kLanes * V - 1) / (kLanes * V));");
      if (c.smem_row) {
        line("  ", "extern __shared__ float4 row_smem[];  // kInputs x kItems x kThreads x V floats (row_smem_bytes)");
        for (size_t i = 0; i < p.inputs.size(); ++i)
          if (!per_row(i))
            line("  ", fmt::format("const SmemSlice<V> l{0}{{reinterpret_cast<float*>(row_smem) + {0} * kItems * kThreads * V}};", i));
      } else {
        for (size_t i = 0; i < p.inputs.size(); ++i)
          if (!per_row(i)) line("  ", fmt::format("float l{}[kItems][V];", i));
      }
      line("  ", "#pragma unroll");
      line("  ", "for (int k = 0; k < kItems; ++k) {");
      line("    ", "const int64_t col0 = (int64_t(k) * kLanes + lane) * V;");
      for (size_t i = 0; i < p.inputs.size(); ++i)
        if (!per_row(i))
          line("    ", fmt::format("if (col0 < kCols) {{ {1} }} else for (int e = 0; e < V; ++e) l{0}[k][e] = 0.0f;", i,
                                 load_line(i, "col0", fmt::format("l{}[k]", i))));
      line("  ", "}");
    }
    row_inputs();
    row_values(0);
    // A pick that nothing reduces further, of a per-row output: the thread passing the index's column holds the row's
    // value and stores the output itself (no reduction over the row, whose barriers are most of a short row's time).
    const RowStatement* own_pick = nullptr;
    if (p.output_per_row) {
      std::vector<const RowStatement*> picks;
      for (const auto& s : p.statements)
        if (s.kind == RowStatement::Kind::reduce && s.reduce == "pick") picks.push_back(&s);
      if (picks.size() == 1 && lv.at(picks[0]->var) == max_level) own_pick = picks[0];
    }
    for (int level = 0; level < max_level; ++level) {
      std::vector<std::string> acc, before, after;
      std::vector<const RowStatement*> reds;
      for (const auto& s : p.statements)
        if (s.kind == RowStatement::Kind::reduce && lv.at(s.var) == level + 1) reds.push_back(&s);
      // With the row in registers, max then sum of exp(x - max) costs one expf per element; the online update
      // (a pass over memory per level) costs a branch and up to two. (One reduction of each thread's (max, sum) pair
      // instead, tried on the H200 on rows of 4096 at 8 elements a thread, 2026-12-02: 0.41 ms vs 0.23, its combine's
      // two expf a step costing more than the reduction it saves.)
      std::vector<const RowStatement*> max_then_sum, mean_then_var;
      for (const auto* r : reds) {
        if (r->reduce == "maxsumexp" && c.one_pass) {
          line("  ", fmt::format("float a_{}_m = -INFINITY;", r->var));
          acc.push_back(fmt::format("a_{0}_m = fmaxf(a_{0}_m, {1});", r->var, r->operand));
          max_then_sum.push_back(r);
        } else if (r->reduce == "maxsumexp") {
          // The online update once per access of V elements (one rescale, no branch per element).
          line("  ", fmt::format("MaxSumExp a_{}{{-INFINITY, 0.0f}};", r->var));
          before.push_back(fmt::format("float t_{}[V];", r->var));
          acc.push_back(fmt::format("t_{}[e] = {};", r->var, r->operand));
          after.push_back(fmt::format("add_exp(a_{0}, t_{0});", r->var));
        } else if (r->reduce == "meanvar" && c.one_pass) {
          // The row in registers: the mean, then the squared deviations from it (exact two-pass, no memory traffic;
          // Welford's division per element cost short rows 2x on the H100).
          line("  ", fmt::format("float a_{}_m = 0.0f;", r->var));
          acc.push_back(fmt::format("a_{0}_m += {1};", r->var, r->operand));
          mean_then_var.push_back(r);
        } else if (r->reduce == "meanvar") {
          line("  ", fmt::format("MeanM2 a_{}{{0.0f, 0.0f, 0.0f}};", r->var));
          acc.push_back(fmt::format("add_value(a_{}, {});", r->var, r->operand));
        } else if (r->reduce == "pick") {
          // The one lane passing the index's column keeps the element; the row's sum of zeros and it is it exactly.
          line("  ", fmt::format("float a_{} = 0.0f;", r->var));
          if (r == own_pick) {
            line("  ", fmt::format("bool own_{} = false;", r->var));
            acc.push_back(fmt::format("if (col0 + e == ix{0}) {{ a_{1} = {2}; own_{1} = true; }}", r->input, r->var, r->operand));
          } else {
            acc.push_back(fmt::format("if (col0 + e == ix{}) a_{} = {};", r->input, r->var, r->operand));
          }
        } else {
          const char* init = r->reduce == "sum" ? "0.0f" : r->reduce == "max" ? "-INFINITY" : "INFINITY";
          line("  ", fmt::format("float a_{} = {};", r->var, init));
          acc.push_back(r->reduce == "sum" ? fmt::format("a_{0} += {1};", r->var, r->operand)
                                           : fmt::format("a_{0} = {2}(a_{0}, {1});", r->var, r->operand, r->reduce == "max" ? "fmaxf" : "fminf"));
        }
      }
      if (!reds.empty()) sweep(level, acc, false, before, after);
      for (const auto* r : reds) {
        if (r->reduce == "maxsumexp" && c.one_pass) {
          line("  ", fmt::format("const float {0}_m = row_reduce(a_{0}_m, OpMax{{}}, smem_f);", r->var));
        } else if (r == own_pick) {
          line("  ", fmt::format("const float {0} = a_{0};  // the owning thread's", r->var));
        } else if (r->reduce == "maxsumexp") {
          line("  ", fmt::format("const MaxSumExp r_{0} = row_reduce(a_{0}, OpMaxSumExp{{}}, smem_ms);", r->var));
          line("  ", fmt::format("const float {0}_m = r_{0}.m, {0}_s = r_{0}.s;", r->var));
        } else if (r->reduce == "meanvar" && c.one_pass) {
          line("  ", fmt::format("const float {0}_m = row_reduce(a_{0}_m, OpSum{{}}, smem_f) / float(kCols);", r->var));
        } else if (r->reduce == "meanvar") {
          line("  ", fmt::format("const MeanM2 r_{0} = row_reduce(a_{0}, OpMeanM2{{}}, smem_mv);", r->var));
          line("  ", fmt::format("const float {0}_m = r_{0}.mean, {0}_v = r_{0}.m2 / r_{0}.n;", r->var));
        } else {
          const char* op = r->reduce == "sum" || r->reduce == "pick" ? "OpSum" : r->reduce == "max" ? "OpMax" : "OpMin";
          line("  ", fmt::format("const float {0} = row_reduce(a_{0}, {1}{{}}, smem_f);", r->var, op));
        }
      }
      second_sum(level, mean_then_var, "v", "({1} - {0}_m) * ({1} - {0}_m)", " / float(kCols)");
      // x == max gives 1 where x - max is NaN (+-inf rows), as the online update's (max, sum) would.
      second_sum(level, max_then_sum, "s", "{1} == {0}_m ? 1.0f : expf({1} - {0}_m)", "");
      row_values(level + 1);
    }
    if (p.output_per_row) {
      line("  ", fmt::format("if ({}{}) out[0] = from_float<Element>({});", own_pick ? "own_" + own_pick->var : "lane == 0",
                             guarded() ? " && live" : "", p.output));
    } else {
      sweep(max_level, {fmt::format("y[e] = {};", p.output)}, true);
    }
    line("", "}");
  }
};

std::string launch_text(const RowProgram& p, const RowwiseKernelConfig& c) {
  if (p.scan())
    return R"(  const int64_t rows_per_cta = kWarpPerRow ? kThreads / 32 : 1, ctas = (a->rows + rows_per_cta - 1) / rows_per_cta;
  if (ctas > 2147483647) return FACT_ERR_SHAPE;  // CUDA's grid limit
  if (aligned) scan_kernel<kVec><<<dim3(unsigned(ctas)), kThreads, 0, stream>>>(*a);
  else scan_kernel<1><<<dim3(unsigned(ctas)), kThreads, 0, stream>>>(*a);)";
  if (p.flat())
    return R"(  // One vector per thread (the grid-stride loop only for grids past CUDA's 2^31 - 1 CTAs): on the H100 a grid
  // capped at twice the resident CTAs reached 2.84 TB/s on 6.4 GB, a full grid 3.03 TB/s (= cudaMemcpy).
  const int64_t n = a->rows * a->cols, cap = 2147483647;
  auto grid = [&](int v) { int64_t b = (n / v + kThreads - 1) / kThreads; return dim3(unsigned(b < cap ? b : cap)); };
  if (aligned) flat_kernel<kVec><<<grid(kVec), kThreads, 0, stream>>>(*a);
  else flat_kernel<1><<<grid(1), kThreads, 0, stream>>>(*a);)";
  if (p.inner > 1)
    return R"(  constexpr int64_t tiles = (kInner + kThreads / kSplit - 1) / (kThreads / kSplit);
  if (a->rows / kInner > 2147483647 / tiles) return FACT_ERR_SHAPE;  // CUDA's grid limit
  row_kernel<1><<<dim3(unsigned(a->rows / kInner * tiles)), kThreads, 0, stream>>>(*a);)";
  // A row staged in shared memory takes it dynamically (past the 48 KB a launch gets without asking).
  const std::string smem = c.smem_row ? R"(
  for (auto [kernel, bytes] : {std::pair{row_kernel<kVec>, row_smem_bytes(kVec)}, std::pair{row_kernel<1>, row_smem_bytes(1)}})
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess) return FACT_ERR_INIT;)"
                                      : "";
  const std::string bytes_vec = c.smem_row ? "row_smem_bytes(kVec)" : "0", bytes_1 = c.smem_row ? "row_smem_bytes(1)" : "0";
  if (c.cluster > 1)
    return fmt::format(R"(  // Clusters of more than 8 CTAs are an opt-in of the kernel (the H100 schedules up to 16).
  if (kCluster > 8) {{
    cudaFuncSetAttribute(row_kernel<kVec>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    cudaFuncSetAttribute(row_kernel<1>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  }}{}
  if (a->rows > 2147483647 / kCluster) return FACT_ERR_SHAPE;  // CUDA's grid limit
  const dim3 grid(unsigned(a->rows * kCluster));
  if (aligned) row_kernel<kVec><<<grid, kThreads, {}, stream>>>(*a);
  else row_kernel<1><<<grid, kThreads, {}, stream>>>(*a);)", smem, bytes_vec, bytes_1);
  return fmt::format(R"(  const int64_t rows_per_cta = kWarpPerRow ? kThreads / kRowLanes : 1;{}
  const dim3 grid(unsigned((a->rows + rows_per_cta - 1) / rows_per_cta));
  if (aligned) row_kernel<kVec><<<grid, kThreads, {}, stream>>>(*a);
  else row_kernel<1><<<grid, kThreads, {}, stream>>>(*a);)", smem, bytes_vec, bytes_1);
}

}  // namespace

bool takes_row_stride(const RowProgram& p) { return !p.flat() && p.inner == 1; }

json RowwiseKernelConfig::to_json() const {
  json j = {{"threads", threads}, {"vec", vec}, {"warp_per_row", warp_per_row}, {"one_pass", one_pass}};
  if (cluster > 1) j["cluster"] = cluster;  // absent for a CTA per row: earlier configs keep their ids
  if (warp_per_row && row_lanes < 32) j["row_lanes"] = row_lanes;  // absent for a whole warp, likewise
  if (split > 1) j["split"] = split;
  if (smem_row) j["smem_row"] = true;  // absent for rows in registers, likewise
  if (items > 1) j["items"] = items;    // scans only, likewise
  return j;
}

RowwiseKernelConfig RowwiseKernelConfig::from_json(const json& j) {
  RowwiseKernelConfig c;
  c.threads = j.at("threads");
  c.vec = j.at("vec");
  c.warp_per_row = j.at("warp_per_row");
  c.one_pass = j.at("one_pass");
  c.cluster = j.value("cluster", 1);
  c.split = j.value("split", 1);
  c.row_lanes = j.value("row_lanes", 32);
  c.smem_row = j.value("smem_row", false);
  c.items = j.value("items", 1);
  if (c.items < 1 || c.items > 8 || (c.items & (c.items - 1)))
    throw Error(fmt::format("row-wise config {}: items must be 1, 2, 4 or 8 accesses per thread of a scan's tile", j.dump()));
  if (c.smem_row && (!c.one_pass || c.warp_per_row))
    throw Error(fmt::format("row-wise config {}: smem_row stages a one-pass row of a CTA or cluster in shared memory", j.dump()));
  if (c.row_lanes < 2 || c.row_lanes > 32 || (c.row_lanes & (c.row_lanes - 1)) || (c.row_lanes < 32 && !c.warp_per_row))
    throw Error(fmt::format("row-wise config {}: row_lanes must be 2, 4, 8, 16 or 32, and below 32 only with warp_per_row",
                            j.dump()));
  if (c.split < 1 || c.split > 32 || (c.split & (c.split - 1)) || c.threads % c.split)
    throw Error(fmt::format("row-wise config {}: split must be 1, 2, 4, 8, 16 or 32 threads per row, dividing threads", j.dump()));
  if (c.cluster < 1 || c.cluster > 16 || (c.cluster & (c.cluster - 1)) || (c.cluster > 1 && c.warp_per_row))
    throw Error(fmt::format("row-wise config {}: cluster must be 1, 2, 4, 8 or 16 CTAs per row, and 1 with a warp per row",
                            j.dump()));
  if (c.threads % 32 || c.threads < 32 || c.threads > 1024 || c.vec < 1 || c.vec > 8)
    throw Error(fmt::format("row-wise config {}: threads must be a multiple of 32 up to 1024, vec 1 to 8", j.dump()));
  return c;
}

std::string RowwiseKernelConfig::text() const {
  return fmt::format("{} threads, vec {}{}{}{}{}{}", threads, vec,
                     !warp_per_row ? "" : row_lanes == 32 ? ", a warp per row" : fmt::format(", {} lanes per row", row_lanes),
                     cluster > 1 ? fmt::format(", a cluster of {} CTAs per row", cluster) : "",
                     split > 1 ? fmt::format(", {} threads per strided row", split) : "",
                     !one_pass ? "" : smem_row ? ", one pass (row in shared memory)" : ", one pass (row in registers)",
                     items > 1 ? fmt::format(", {} accesses a thread per scan tile", items) : "");
}

std::vector<RowwiseKernelConfig> rowwise_kernel_configs(const RowProgram& p, const json& space, const ArchSpec& arch) {
  const int vmax = 16 / element_bytes(p.dtype);
  const int max_regs = space.value("max_row_elements_per_thread", 32);
  const bool windows = std::any_of(p.inputs.begin(), p.inputs.end(), [](auto k) { return k == discover::RowInputKind::window; });
  // A row staged in shared memory, per CTA: the data's figure is sm90's (227 KB less the reductions' partials).
  const int64_t max_smem = arch.arch == Arch::sm90 ? space.value("max_row_smem_bytes", int64_t{0}) : 0;
  // Elements per input a thread may hold in registers, in CTAs of `threads`. Measured on the H100 (softmax,
  // 2026-11-25): 1024-thread CTAs holding more than 16 elements per thread (64 registers each) and one-pass clusters
  // of 16 CTAs ran 1.4-4x slower than the next config.
  auto register_cap = [&](int threads) { return std::min<int64_t>(max_regs, 16384 / threads); };
  // The inputs a thread holds elements of (a per-row input is one value: a cross entropy's index and mask made the
  // 256-thread one-pass kernel of rows of 4096 look three times its registers, and ranked 512 threads first).
  const int64_t swept = std::count_if(p.inputs.begin(), p.inputs.end(), [](auto k) { return k != discover::RowInputKind::per_row; });
  const double sms = arch.sm_count > 0 ? arch.sm_count : 132;
  std::vector<int> clusters = {1};
  if (arch.arch == Arch::sm90) clusters = space.value("clusters", std::vector<int>{1});
  std::vector<std::pair<double, RowwiseKernelConfig>> scored;
  if (p.scan()) {
    // A CTA per row, or a warp per row (CTAs of up to 256 threads); a tile of about 16 elements a thread in flight (the
    // loads of one tile are independent, its scan waits on all of them), no lane idle past the row's end, 256 threads
    // (a few CTAs a SM overlap one's scan with another's loads). A warp per row second on long rows (no barriers, but a
    // row's tiles walked by 32 lanes).
    for (int threads : space.at("threads").get<std::vector<int>>())
      for (bool wpr : {false, true})
        for (int vec : {vmax, 1})
          for (int items : {1, 2, 4, 8}) {
            if (wpr && threads > 256) continue;
            const double lanes = wpr ? 32 : threads;
            const double idle = std::max(0.0, std::log2(lanes * vec * items / double(p.cols)));
            RowwiseKernelConfig c{threads, vec, wpr, false};
            c.items = items;
            double score = (vec == vmax ? 0 : 10) + 2 * idle + std::abs(std::log2(double(vec) * items / 16.0)) +
                           0.5 * std::abs(std::log2(threads / 256.0)) + (wpr && p.cols > 4096 ? 0.25 : 0);
            scored.push_back({score, c});
          }
    std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<RowwiseKernelConfig> out;
    for (auto& [s, c] : scored) out.push_back(c);
    return out;
  }
  // One value per row after one reduction level (a loss's per-row partials, a row sum): streaming reads each row
  // once too, so holding it in registers (which long rows buy with clusters) gains nothing. Measured on the H100
  // (2026-11-26): hinge loss partials over 32768 x 32768, one-pass 8-CTA clusters 2.00 ms for 1.43 ms of reads.
  int top_level = 0;
  for (const auto& [v, l] : levels(p)) top_level = std::max(top_level, l);
  const double two_pass_cost = p.output_per_row && top_level <= 1 ? 0 : 20;
  if (p.inner > 1 && p.reductions() > 0) {
    // Strided rows: a warp spans 32 adjacent rows (one coalesced run per access; fewer only when there are
    // fewer); `split` threads share a row when the rows are long or few.
    const int64_t warp_rows = std::min<int64_t>(32, int64_t(1) << int(std::ceil(std::log2(double(p.inner)))));
    const int64_t outer = p.rows / p.inner;
    for (int threads : space.at("threads").get<std::vector<int>>()) {
      for (int split = 1; split <= 32 && split <= threads; split *= 2) {
        const int64_t rows_per_cta = threads / split;
        if (rows_per_cta < warp_rows || (split > 1 && rows_per_cta > std::max<int64_t>(warp_rows, p.inner))) continue;
        const int64_t per_thread = (p.cols + split - 1) / split;
        const double ctas = double(outer) * double((p.inner + rows_per_cta - 1) / rows_per_cta);
        bool underfilled = ctas < 2 * sms && double(p.rows) * double(p.cols) >= double(1 << 20);
        for (bool one : {true, false}) {
          if (one && per_thread * swept > register_cap(threads)) continue;
          // One pass first, a full GPU, few threads per row (each split adds a shared-memory combine), 256 threads.
          double score = (one ? 0 : two_pass_cost) + (underfilled ? 8 * std::log2(2 * sms / std::max(ctas, 1.0)) : 0) +
                         std::log2(split) + 0.5 * std::abs(std::log2(threads / 256.0));
          RowwiseKernelConfig c{threads, 1, false, one};
          c.split = split;
          scored.push_back({score, c});
        }
      }
    }
  }
  // Whether `lanes` lanes of CTAs of `threads` hold the row in registers (clusters of 16 measured slower, below).
  auto in_registers = [&](int64_t lanes, int threads, int cluster) {
    return cluster < 16 && (p.cols + lanes - 1) / lanes * swept <= register_cap(threads);
  };
  bool fits_registers = false;  // some CTA or cluster holds the row in registers
  for (int threads : space.at("threads").get<std::vector<int>>())
    for (int cluster : clusters) fits_registers = fits_registers || in_registers(int64_t(threads) * cluster, threads, cluster);
  for (int threads : space.at("threads").get<std::vector<int>>()) {
    if (p.inner > 1 && p.reductions() > 0) break;
    for (int vec : {vmax, 1}) {
      if (p.reductions() == 0) {
        // Flat: 256 threads with 16-byte accesses is the copy kernel's shape; with a pool's window loads 128 (on the
        // H200, 2026-11-29, 128 threads won all five flat pools measured, 2-5% ahead of 256: level2/35, 46, 82, 6).
        const double best = windows ? 128.0 : 256.0;
        double score = std::abs(std::log2(threads / best)) + (vec == vmax ? 0 : 10);
        scored.push_back({score, {threads, vec, false, false}});
        continue;
      }
      // (lanes per row, CTAs per row; lanes 0 = the CTA's): a CTA or a cluster of them; a warp (small CTAs keep the
      // grid wide); rows shorter than one access of a warp a few of its lanes each, no lane idle and each access
      // at least a 32-byte sector.
      std::vector<std::pair<int, int>> layouts;
      for (int cluster : clusters) layouts.push_back({0, cluster});
      if (threads <= 256) {
        layouts.push_back({32, 1});
        for (int row_lanes = 16; row_lanes >= 2 && p.cols < 32 * vec; row_lanes /= 2)
          if (int64_t(row_lanes) * vec <= p.cols && row_lanes * vec * element_bytes(p.dtype) >= 32)
            layouts.push_back({row_lanes, 1});
      }
      for (auto [row_lanes, cluster] : layouts) {
        const bool wpr = row_lanes > 0;
        int64_t lanes = wpr ? row_lanes : int64_t(threads) * cluster;
        int64_t per_thread = (p.cols + lanes - 1) / lanes;
        double ctas = wpr ? double(p.rows) / (threads / row_lanes) : double(p.rows) * cluster;
        // Filling the GPU matters once the rows are megabytes; below that a launch's latency dominates.
        bool underfilled = ctas < 2 * sms && double(p.rows) * double(p.cols) >= double(1 << 20);
        // Lanes past the row's end idle: a 256-thread CTA on rows of 16 (group norms of 512 groups) ran 4.6x
        // slower than PyTorch on the H100 (2026-11-26), a warp per row idles 8x fewer, 4 lanes per row none.
        const double idle = std::max(0.0, std::log2(double(lanes) * vec / double(p.cols)));
        for (bool one : {true, false}) {
          if (one && !in_registers(lanes, threads, cluster)) continue;
          // One pass over memory first; then a grid that fills every SM twice (few long rows: a cluster of
          // CTAs per row), about 16 elements per thread, the fewest CTAs per cluster (each reduction costs
          // three cluster barriers: a 4-CTA one-pass row of 65535 ran 7.9 ms, an 8-CTA one 8.6-13 ms), and no
          // 1024-thread one-pass CTA: alone on its SM (past 32 registers a thread), its loads stop at each
          // reduction's barriers where two CTAs a SM overlap them (on the H200: cross entropy over 1020 rows of
          // 50257, clusters of 4, 1024 threads 0.286 ms vs 512 0.176; level1/95's rows of 4096, 0.33 vs 0.22).
          double score = (one ? 0 : two_pass_cost) + (vec == vmax ? 0 : 10) + idle +
                         std::abs(std::log2(std::max<int64_t>(per_thread, 1) / 16.0)) + (wpr && p.cols > 1024 ? 50 : 0) +
                         (underfilled ? 8 * std::log2(2 * sms / std::max(ctas, 1.0)) : 0) + (one ? 3 : 1) * std::log2(cluster) +
                         (one && threads >= 1024 ? 1 : 0);
          RowwiseKernelConfig c{threads, vec, wpr, one};
          c.cluster = cluster;
          if (wpr) c.row_lanes = row_lanes;
          scored.push_back({score, c});
        }
        // A row too long for registers, read once all the same: staged in shared memory over a CTA or a cluster
        // (where its passes re-read it), the more threads the more loads in flight; measured second (below). Not
        // where streaming reads each row once too (two_pass_cost 0).
        const int64_t smem_bytes = int64_t(p.inputs.size()) * ((per_thread + vec - 1) / vec) * vec * threads * 4;
        if (!wpr && two_pass_cost > 0 && !fits_registers && smem_bytes <= max_smem) {
          double score = 2 + (vec == vmax ? 0 : 10) + idle + 0.5 * std::abs(std::log2(threads / 1024.0)) +
                         (underfilled ? 8 * std::log2(2 * sms / std::max(ctas, 1.0)) : 0) + 3 * std::log2(cluster);
          RowwiseKernelConfig c{threads, vec, false, true};
          c.cluster = cluster;
          c.smem_row = true;
          scored.push_back({score, c});
        }
      }
    }
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<RowwiseKernelConfig> out;
  for (auto& [s, c] : scored) out.push_back(c);
  // A row staged in shared memory second, after the best pass over global memory, so that --top 2 measures both:
  // on the H200 (2026-11-28, KernelBench level1/23-24, 4096 rows of 393216) two passes ran at 4.1 TB/s, softmax
  // 4.74 ms vs 5.34 ms staged over a cluster of 8 (one CTA a SM: its loads, reductions and stores take turns),
  // log_softmax 4.91 vs 4.86 ms.
  auto other = std::find_if(out.begin(), out.end(), [](const auto& c) { return !c.smem_row; });
  if (!out.empty() && out.front().smem_row && other != out.end()) std::rotate(out.begin(), other, other + 1);
  return out;
}

namespace {
// Whether a row's accesses are whole vectors: its columns (and a padded output's, from where its values start) in
// 16-byte steps.
std::string whole_vectors(const RowProgram& p, int shift) {
  if (!p.padded()) return "a->cols % kVec == 0";
  return fmt::format("(a->cols + {}) % kVec == 0 && {} % kVec == 0 && a->output_row_stride % kVec == 0", shift,
                     p.pad_lo - shift);
}
}  // namespace

std::string render_rowwise_kernel(const RowProgram& p, const RowwiseKernelConfig& c, const std::string& config_id,
                                  const std::string& summary) {
  KernelWriter w{p, c};
  for (size_t i = 0; i < p.inputs.size(); ++i)
    if (w.window(i)) w.window_function(i);
  if (p.scan()) {
    w.scan_rows();
  } else if (p.flat()) {
    if (p.output_per_row) throw Error("a row-wise program without reductions has no per-row output");
    w.flat();
  } else {
    w.rows();
  }
  std::string broadcast;
  for (size_t i = 0; i < p.inputs.size(); ++i)
    broadcast += fmt::format("{}{}", i ? ", " : "", p.inputs[i] != discover::RowInputKind::full ? "true" : "false");
  std::string input_bytes;  // each input's element size (0: read one value a row, no vector access)
  for (size_t i = 0; i < p.inputs.size(); ++i)
    input_bytes += fmt::format("{}{}", i ? ", " : "", w.per_row(i) ? "0" : p.boolean[i] ? "1" : "int(sizeof(Element))");
  json describe = c.to_json();
  describe["ops"] = p.ops;
  return render_template_file("rowwise/generated_kernel.cu.in",
                              {{"config_id", config_id},
                               {"summary", summary},
                               {"element", element_type(p.dtype)},
                               {"threads", std::to_string(c.threads)},
                               {"vec", std::to_string(c.vec)},
                               {"warp_per_row", c.warp_per_row ? "true" : "false"},
                               {"row_lanes", std::to_string(c.warp_per_row ? c.row_lanes : 32)},
                               {"cluster", std::to_string(c.cluster)},
                               {"split", std::to_string(c.split)},
                               {"items", std::to_string(c.items)},
                               {"inner", std::to_string(p.inner)},
                               {"cols", std::to_string(p.cols)},
                               {"cols_refused", p.flat() && w.any_cols() ? "a->cols < 1"
                                                : p.inner > 1 ? fmt::format("a->cols != {} || a->rows % {} != 0", p.cols, p.inner)
                                                              : fmt::format("a->cols != {}", p.cols)},
                               {"fp32_activation", render_template_file("cutlass/fp32_activation.hpp.in", {})},
                               {"kernel", w.out},
                               {"num_inputs", std::to_string(p.inputs.size())},
                               {"broadcast", broadcast},
                               {"output_row_stride", p.output_per_row ? "1" : p.padded() ? std::to_string(p.out_cols()) : "a->cols"},
                               {"input_bytes", input_bytes},
                               {"row_stride_refused", takes_row_stride(p) ? "a->input_row_stride[i] < a->cols"
                                                                           : "a->input_row_stride[i] != a->cols"},
                               {"whole_vectors", p.flat() && w.any_cols() ? "true" : whole_vectors(p, w.scan_shift())},
                               // Rows indexed from their start (a row view's stride too) need whole vectors per stride.
                               {"row_stride_aligned", p.flat() && w.any_cols() ? "true" : "a->input_row_stride[i] % kVec == 0"},
                               {"launch", launch_text(p, c)},
                               {"describe", describe.dump()}});
}

}  // namespace fact::realize
