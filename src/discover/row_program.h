#pragma once
// A row-wise fragment (fact-rowwise-fragment JSON, rowwise_fragment.h) lowered to the statements a generated
// kernel runs: loads of its inputs, float expressions (data/ir/pointwise_ops.json read through the
// activations' "expr" of data/epilogues/activations.json), reductions over the row and scans along it
// (data/ir/row_reductions.json), picks of one element per row (a gather by an index input) and views of per-row values.
// Every value is either one per element of the [rows, cols] row block ("full") or one per row. A row is the
// reduced dims' elements at one position of the others: contiguous when the reduced dims are the trailing ones,
// else strided by `inner`, the element count of the dims after them (a reduction over channels of [N, C, H, W]:
// rows N*H*W of C elements, inner H*W).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fact::discover {

struct RowStatement {
  enum class Kind { load, expr, reduce, scan };
  Kind kind = Kind::expr;
  std::string var;      // C identifier of the value (reduce maxsumexp: var_m and var_s; meanvar: var_m and var_v)
  bool per_row = false; // one value per row (else per element)
  int input = -1;       // load: the fragment input it reads; reduce pick: the index input
  std::string expr;     // expr: C++ float expression over earlier vars
  std::string reduce;   // reduce: "sum", "max", "min", "maxsumexp" (online max and sum of exp(x - max)) or "meanvar"
                        // (Welford's mean and population variance in one sweep), "pick" (the element at column
                        // index[row] of `operand`: a gather along the row)
                        // scan: "sum" or "prod" (an inclusive prefix along the row: one value per element)
  std::string operand;  // reduce, scan: the per-element var reduced or scanned
};

// [rows, cols]; one [cols] row shared by every row; one value per channel (a norm's [C] weight): element f of
// the flattened full tensor reads channel (f / channel_inner) % channels, whatever the rows are; a pool's input
// (window): element f of the full tensor, the pool's output, is the pool of f's window of it; or one value per row
// (the reduced dims kept as 1 or dropped: a gather's index, a cross entropy's mask of ignored targets).
enum class RowInputKind { full, row_broadcast, channel, window, per_row };
struct ChannelIndex {
  int64_t channels = 0, inner = 1;  // C, and the elements of one channel's plane (H*W; 1 for [N, C])
};
// A pooling window (data/ir/row_reductions.json "windows") over the last `spatial` dims of an input, whose leading dims
// are the full tensor's: every per-dim list has `spatial` entries.
struct WindowRead {
  std::string form;  // "max" or "avg"; empty: the input is not read through a window
  std::vector<int64_t> in, out;  // the pooled dims' sizes before and after
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool count_include_pad = true;
  int64_t divisor = 0;  // divisor_override (0: none)
};

struct RowProgram {
  std::vector<RowStatement> statements;  // in evaluation order
  std::vector<RowInputKind> inputs;
  std::vector<ChannelIndex> channel;     // parallel to inputs: how a channel input is indexed
  std::vector<WindowRead> window;        // parallel to inputs: how a window input is pooled
  std::vector<bool> boolean;             // parallel to inputs: a bool tensor, read as 1 or 0
  std::vector<bool> reversed;            // parallel to inputs: read from the row's end (only flips read it; scans only)
  std::vector<bool> index;               // parallel to inputs: an int64 per-row input only gathers read (their index)
  bool output_reversed = false;          // the output is written from the row's end (a flip of it; scans only)
  std::string output;                    // the var written
  bool output_per_row = false;
  // Constant columns around each output row (data/ir/row_reductions.json "pads"; scans only): rows of pad_lo + cols +
  // pad_hi elements, the value at [pad_lo, pad_lo + cols), pad_value (a C float literal) elsewhere.
  int64_t pad_lo = 0, pad_hi = 0;
  std::string pad_value = "0.0f";
  bool padded() const { return pad_lo > 0 || pad_hi > 0; }
  int64_t out_cols() const { return cols + pad_lo + pad_hi; }
  int64_t rows = 0, cols = 0;
  int64_t inner = 1;                     // stride between a row's elements (1: rows are contiguous)
  std::string dtype;
  std::vector<std::string> ops;          // the fragment's aten ops, graph order (for reports)
  int reductions() const;
  // The scan statement (at most one, and then no reduction: lower_row_program refuses more), or null.
  const RowStatement* scan() const;
  // No reduction and no scan: every element on its own (the flat kernel).
  bool flat() const { return reductions() == 0 && !scan(); }
  // No reduction, no pool and every expression a plain copy of a value: a region of identities only (dropout in
  // eval, clone, detach), which a kernel could only copy.
  bool computes_nothing() const;
};

// Lowers the fragment; throws Error naming the node and why it cannot be generated (a reduction not over
// the trailing dims, an op no table reads, a mixed dtype, ...).
RowProgram lower_row_program(const nlohmann::json& fragment);

// The dims of a rank-`rank` input a row reduction node folds into a row: [first, first + count), adjacent
// (the last one for softmax over the last dim); count 0 when the op is not a row reduction of
// data/ir/row_reductions.json. Throws Error naming the node when the dims are not adjacent or are all of them.
struct ReducedDims {
  int first = 0, count = 0;
  int64_t groups = 1;  // the first reduced dim splits into this many rows (group_norm's groups of channels)
  int after(int rank) const { return rank - first - count; }  // dims behind them (0: the row is contiguous)
  bool operator==(const ReducedDims&) const = default;
};
ReducedDims row_reduction_dims(const std::string& node, const std::string& op, const nlohmann::json& args,
                               const nlohmann::json& kwargs, int rank);

// Whether two shapes hold the same elements in the same order: equal once their dims of extent 1 are dropped.
bool same_but_unit_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// `k`, reduced dims of a tensor shaped `in`, as dims of `full`: the same elements with dims of extent 1 added or
// dropped (KernelBench level2/55's sum over dim 1 of a squeeze of a pool's [128, 1, 16384]). nullopt where `in` is no
// such view of `full` or reduces only dims of extent 1 that `full` lacks.
std::optional<ReducedDims> reduced_dims_in(const std::vector<int64_t>& in, const ReducedDims& k, const std::vector<int64_t>& full);

// row_reduction_dims as dims of `full` for a node whose operand is shaped `in`: where `in` is `full` with dims of
// extent 1 added or dropped the op's dims index `in` and are mapped (an error where they reduce only such dims);
// otherwise (an operand one value per row) they index `full`'s rank.
ReducedDims row_reduction_dims_of(const std::string& node, const std::string& op, const nlohmann::json& args,
                                  const nlohmann::json& kwargs, const std::vector<int64_t>& in, const std::vector<int64_t>& full);

// Whether a value shaped `a`, broadcast by PyTorch's rules against a value shaped `o` (one of `full`'s elements, dims
// of extent 1 aside), is one value per row of `rows` (the dims of `full` folded into a row): 1 along those dims, the
// full extent along the others. A reduction's [rows] result without its dims is not, against [rows, cols] values: it
// lines up with the last dim.
bool broadcasts_per_row(const std::vector<int64_t>& a, const std::vector<int64_t>& o, const std::vector<int64_t>& full,
                        const ReducedDims& rows);

// Whether the op is a comparison or predicate of data/ir/pointwise_ops.json: its bool result is a value a
// generated kernel holds as 1 or 0, never the fragment's output.
bool yields_bool(const std::string& op);

// Whether argument `index` of a row reduction op is the per-channel weight or bias of an instance or group norm.
bool row_reduction_weight_arg(const std::string& op, int index);

// Whether argument `index` of an op is one of its per-channel [C] vectors over dim 1: an instance or group norm's weight
// or bias, a BatchNorm's (in eval) weight, bias, running mean or running variance.
bool channel_vector_arg(const std::string& op, int index);

// The form of a row reduction op of data/ir/row_reductions.json ("sum", "mean", "softmax", ...), "" for another op.
std::string row_reduction_form(const std::string& op);

// Whether an op is one the lowering reads (pointwise table, row reductions, scans or windows).
bool row_program_reads(const std::string& op);

// Whether an op is a view that adds or drops dims of size 1 (data/ir/row_reductions.json "views"): of a per-row value
// the same value (the region-growing pass takes one only after a node of its region).
bool is_row_view_op(const std::string& op);

// Whether an op flips a tensor (data/ir/row_reductions.json "reversals"): a copy op a generated scan reads through.
bool is_reversal_op(const std::string& op);

// Whether an op picks one element per row by an index (data/ir/row_reductions.json "gathers").
bool is_gather_op(const std::string& op);

// Whether an op passes its input on unchanged (data/ir/pointwise_ops.json "identity": clone, detach).
bool is_identity_op(const std::string& op);

// Whether an op pools a window of its input (data/ir/row_reductions.json "windows"): a generated kernel computes it
// where it loads that input, which must be a tensor in memory (an input of the fragment).
bool is_window_op(const std::string& op);

// The data/ir/row_reductions.json "pads" form of an op (a constant_pad_nd: "pad"; a cat: "tensors"), or null.
const nlohmann::json* pad_form(const std::string& op);

// An op's argument as the data/ir tables name one ({"arg": i, "kwarg": k, "default": v}, or a bare position): by
// position, else by kwarg, else the default (null without one).
nlohmann::json op_argument(const nlohmann::json& args, const nlohmann::json& kwargs, const nlohmann::json& spec);

// The constant a fill op's node makes (data/ir/row_reductions.json "fills": zeros_like, full, ...); nullopt for another
// op or a value that is not a number.
std::optional<double> fill_constant(const std::string& op, const nlohmann::json& args, const nlohmann::json& kwargs);

// The row reduction whose per-row partials the whole-tensor reduction `op` reduces to its value
// (data/ir/row_reductions.json "whole_tensor": aten.mean.dim for aten.mean.default); "" when `op` is none.
std::string row_partials_of(const std::string& op);

}  // namespace fact::discover
