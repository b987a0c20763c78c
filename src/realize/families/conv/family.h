#pragma once
// The conv family: convolutions (conv1d/2d/3d), forward and transposed, with the GEMM family's epilogue trees, as
// CUTLASS 3.x implicit-GEMM kernels on sm90 (TMA im2col, wgmma); a transposed convolution runs as one stride-1
// forward convolution per output phase (ConvPhase). Grouped and depthwise convolutions (groups > 1), and dense ones of
// few channels in and out (ConvProblem::dense_direct), run as a direct kernel (templates/cute/conv_direct.cu.in: fp32
// FMAs over input planes staged in shared memory). problem.cpp reads a
// match into a ConvProblem; space.cpp has the ConvConfig and its config space; family.cpp renders the kernel and
// conv_op.cpp.in and registers the family. As a GEMM: M = n * z * p * q output pixels, N = k output channels,
// K = c (padded to 16-byte vectors) * t * r * s; a per-channel vector is the epilogue's row broadcast.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/vocabulary.h"
#include "discover/match.h"
#include "ir/graph.h"
#include "realize/config_ranking.h"
#include "realize/families/gemm/gemm_epilogue.h"
#include "realize/template_renderer.h"

namespace fact::realize {

constexpr int kConvSpatial = 3;  // FACT_CONV_SPATIAL: depth, height, width (a 2-D conv has depth 1)
using ConvDims = std::array<int64_t, kConvSpatial>;

// One convolution: extents in the ABI's (d, h, w) order, leading dims of a 1-D/2-D conv at 1. c is x's channels and
// k the output's, whichever way round w holds them ([k, c, ...] forward, [c, k, ...] transposed).
struct ConvProblem {
  int spatial_dims = 2;  // 1, 2 or 3: conv1d / conv2d / conv3d
  int64_t n = 0, c = 0, k = 0;
  ConvDims in{1, 1, 1}, filter{1, 1, 1}, out{1, 1, 1};
  ConvDims stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1};
  bool transposed = false;               // conv_transpose: x[i] * w[r] lands on output i * stride - padding + r * dilation
  ConvDims output_padding{0, 0, 0};      // transposed: added to the output's far end
  int64_t groups = 1;                    // c and k split into groups (depthwise: groups == c); w [k, c / groups, ...]
  // A dense forward convolution of few input and output channels (an image's 3 into 16 or 24: conv.json's
  // limits.direct_dense_max_channels / direct_dense_max_outputs), off a chain of convolutions and not reducing: the
  // direct kernel's, as a grouped one (a tensor-core tile of K = 4 padded channels a tap and N = 16 is mostly padding,
  // and cuDNN runs such Conv3d stems 5-10x off their FMA bound). conv_problem_from_match decides it.
  bool dense_direct = false;
  Element element = Element::f32;  // x, w, out and the epilogue's tensors
  Epilogue epilogue;               // over acc, without C: "none", "bias" or a grown tree
  Arch arch = Arch::sm90;
  // Tuned as a chain of convolutions hands it over (KernelFamily::in_channels_last_chain): x (an implicit GEMM's where
  // its channels are whole 16-byte vectors), the residual and the output channels-last; else the module's
  // channels-first tensors.
  bool channels_last = false;
  // fp32 tensors multiply in 3xTF32 (fp32-accurate: the plan's conv numerics, against cuDNN with TF32 off) rather than
  // TF32. Forward implicit GEMMs only (conv_problem_from_match leaves transposed ones to PyTorch).
  bool x3tf32 = false;
  // "sum", "mean", "max" or "min": the epilogue's values reduced instead of written (grown by
  // discover/epilogue_growth.h), over reduce_over's dims: "pixels" (each image's pixels per channel, [n, k]: a global
  // average pool or spatial sum; sum and mean only, added by fp32 atomics) or "channels" (each pixel's channels,
  // [n, 1, pixels...]: PyTorch's amin / amax / sum / mean over dim 1, one N tile holding every channel); "" writes the
  // output. fp32 implicit GEMMs; the output's layout bit is moot.
  std::string reduce, reduce_over;
  // The op's result: the output [n, k, pixels...], or what the reduction leaves ([n, k] or [n, 1, pixels...]).
  std::vector<int64_t> result_shape() const;

  // fp32 tensors multiply in TF32 (what PyTorch's cuDNN convolutions do by default) or 3xTF32 (x3tf32), bf16/fp16 in
  // their type; the direct kernel (no tensor cores) in fp32 FMAs.
  Numerics numerics() const;
  // Input channels a K step walks: padded_c(), three times over for 3xTF32 (x' = [x_small, x_big, x_big] against
  // w' = [w_big, w_small, w_big] channel blocks), the folded taps' channels where folded.
  int64_t kernel_channels(bool fold) const;
  bool direct() const { return groups > 1 || dense_direct; }  // the direct kernel's, not the implicit GEMM's
  int64_t gemm_m() const { return n * out[0] * out[1] * out[2]; }
  // Input channels as the kernel reads them: c zero-padded to whole 16-byte vectors (TMA's unit).
  int64_t padded_c() const;
  // A width-folded kernel's channels (ConvConfig::fold_width): the filter's width taps times c, zero-padded alike.
  int64_t folded_c() const;
  // Whether folding the width taps into channels can help: a forward implicit GEMM with more than one width tap whose
  // channels fill less than the widest K tile (an image's 3 channels: one 16-byte vector a tap, a K step each).
  bool can_fold_width() const;
  // The implicit GEMM's reduction: the padded channels times the taps (a transposed convolution's outputs each take at most
  // ceil(filter / stride) taps a dim, its phases' sub-filters).
  int64_t gemm_k() const;
  // The output extent PyTorch computes for dim i from the others.
  int64_t expected_out(int i) const;
  // Throws Error naming the field and the fix (extents, TMA's 16-byte alignment of k, the epilogue).
  void validate() const;
  nlohmann::json to_json() const;
  static ConvProblem from_json(const nlohmann::json& j);
};

// The problem of a conv match: x [n, c, (d,) (h,) w] and w [k, c, ...] as the graph has them, the attrs stride /
// padding / dilation (one value stands for every spatial dim), the epilogue the match grew (bias, or the tree of
// Match.kernel "epilogue_tree"). Throws Error naming the match when the kernel cannot take it.
ConvProblem conv_problem_from_match(const discover::Match& match, const ir::Graph& graph, Numerics numerics, Arch arch);

// One dim of a transposed convolution's output phase: the outputs o with (o + padding) mod stride == residue gather
// x through `taps` taps of w (first, first + stride, ...), a stride-1 forward convolution of x with those taps
// reversed, `lower` / `upper` padding and the dilation, whose output q lands at o = stride * q + offset. The kernel
// (templates/cutlass/conv_sm90_fprop.cu.in, launches()) cuts the call the same way.
struct ConvPhase {
  int64_t residue = 0, taps = 0, first = 0, outputs = 0, lower = 0, upper = 0, offset = 0;
};
// The phases of dim i with outputs (some residues have none when the output is short); throws Error naming the
// reason when one cannot be a forward convolution (stride and dilation sharing a factor, outputs no tap reaches, a
// window starting past x's edge).
std::vector<ConvPhase> conv_transposed_phases(const ConvProblem& problem, int i);

// The phases a kernel launch runs together (templates/cutlass/conv_persistent_kernel.hpp.in's Group): the width's,
// with the height's and the depth's while they fit, so that the phases sharing an output row's sectors write them at
// once.
constexpr int kConvPhaseGroup = 4;

// One kernel: the CTA tile (M x N x K elements) and the cluster, plus the problem traits the kernel is specialized on
// (spatial dims, element, epilogue). CUTLASS's sm90 convolutions have one schedule (warp-specialized, one producer
// and one consumer warpgroup, one tile a CTA); FACT's kernel runs it persistent, with one or two consumer warpgroups.
struct ConvConfig {
  int spatial_dims = 2;
  Element element = Element::f32;
  Epilogue epilogue;
  Arch arch = Arch::sm90;
  int tile_m = 128, tile_n = 128, tile_k = 32;
  int cluster_m = 1, cluster_n = 1;
  int ctas_per_sm = 1;  // 2: half the shared memory and 128 registers a thread, so one CTA's stores overlap another's MMAs
  int consumer_warpgroups = 1;  // 2: a 128-row (or taller) tile's rows split between two, CUTLASS's cooperative layout
  // With two consumer warpgroups: each takes tiles of its own in turn (CUTLASS's ping-pong), their MMAs one after
  // the other and their epilogues likewise, so one's epilogue runs under the other's MMAs (one CTA a SM, unsplit).
  bool pingpong = false;
  // Width taps folded into channels: the kernel gathers x' [n, (z,) h, q, s * c] (channel j * c + ci of column q is
  // x's ci at column q * stride - padding + j * dilation) and runs a conv of width 1, so that a K step loads whole
  // taps' rows of channels instead of 16 bytes a pixel (ConvProblem::can_fold_width).
  bool fold_width = false;
  // 3xTF32 (ConvProblem::x3tf32): the kernel splits x and w into their TF32 part and its remainder in the copies it makes
  // of them and runs a TF32 conv over three times the channels, x' = [x_small, x_big, x_big] against
  // w' = [w_big, w_small, w_big]: the sum is x_small w_big + x_big w_small + x_big w_big (each tap's small products
  // first), fp32's accuracy (the small x small product, about 2^-22 relative, is what it leaves out). Never folded.
  bool x3tf32 = false;
  std::string reduce, reduce_over;  // ConvProblem's: the store node's reduction instead of the output
  // 3xTF32: the wgmma k-blocks the tensor cores accumulate before fp32 FADDs take the sum (conv.json's
  // limits.x3tf32_promotion_k_blocks; templates/cutlass/conv_promoting_mainloop.hpp.in says why); 0: never (3xTF32
  // configs recorded before promotion).
  int promotion_k_blocks = 0;
  // Split-K: each tile's K loop cut into this many units of work, which CTAs take like tiles; all but the last store
  // fp32 partial accumulators to the workspace, the last adds them (in split order) and runs the epilogue. For
  // problems of fewer tiles than the CTAs resident at once (small images of many channels).
  int splits = 1;
  // direct (ConvProblem::direct()'s kernel, templates/cute/conv_direct.cu.in): a CTA of conv.json's direct_threads
  // computes tile_w x direct_tile_h() outputs of channel_block channels' planes (each lane every 32nd column, each warp
  // rows_per_warp rows; every staged input plane feeds the block's channels, which share a group), specialized on the
  // filter, stride and dilation (loops unrolled); the fields above are unused.
  bool direct = false;
  int tile_w = 64, rows_per_warp = 4, channel_block = 1;
  // A direct config for a chain of convolutions (ConvProblem::channels_last; MobileNet's depthwise convs between 1x1
  // ones): one thread an output element, channels fastest, x, the residual and out read and written in whichever
  // order FactConvArgs::channels_last gives, so the chain stays channels-last; tile_w and rows_per_warp unused.
  bool channels_last = false;
  ConvDims filter{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1};
  int direct_tile_h() const;  // the warps times rows_per_warp

  std::string id() const;       // "conv_" + 12 hex digits of the canonical JSON's hash
  std::string summary() const;  // e.g. "sm90 conv2d float32 128x128x32 c2x1 add(mul(alpha,acc),row(bias))"
  nlohmann::json to_json() const;
  static ConvConfig from_json(const nlohmann::json& j);
};

// The shared memory one CTA of the config may take (data/families/conv.json limits.cta_smem_bytes, by CTAs a SM):
// the kernel's stage count and the config space's stage check both read it. ctas_per_sm must be 1 or 2.
int64_t conv_cta_smem_bytes(const ConvConfig& config);

// The shared memory an implicit-GEMM config's epilogue takes (CUTLASS's D stages of 32 channels by 64 or 128 rows,
// in which the channels-first store node stages its subtiles, and a residual's C stages), which its mainloop's stages
// leave free.
int64_t conv_epilogue_smem_bytes(const ConvConfig& config);

// The shared memory a direct config's CTA stages its input tile in (fp32, the rows and columns its outputs' windows
// span).
int64_t conv_direct_smem_bytes(const ConvConfig& config);
// Whether a direct config's block of channels holds one filter row's taps in registers at a time rather than the whole
// plane's (conv.json's limits.direct_row_taps_min_block).
bool conv_direct_taps_by_row(const ConvConfig& config);

// Why the config cannot run the problem (a sentence), or empty when it can.
std::string conv_config_rejection(const ConvProblem& problem, const ConvConfig& config);

// The axes come from data/families/conv.json; ranked by wave quantization and tile efficiency.
ConfigSpace<ConvConfig> enumerate_conv_configs(const ConvProblem& problem, int top_n);

// The kernel (.cu exporting the FactConvArgs C ABI; a direct config's from templates/cute/conv_direct.cu.in); throws
// Error when the config cannot be generated.
GeneratedSource generate_conv_kernel(const ConvConfig& config);
// "conv_<id>(Tensor x, Tensor w, Tensor? bias, Tensor? residual, int[] stride, int[] padding, int[] dilation,
// bool transposed, int[] output_padding, int groups, Tensor[] vectors) -> Tensor"
std::string conv_op_schema(const ConvConfig& config);
GeneratedSource generate_conv_op_wrapper(const ConvConfig& config);

}  // namespace fact::realize
