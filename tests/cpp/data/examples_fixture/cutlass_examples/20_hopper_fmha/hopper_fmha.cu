// FusedMultiHeadAttention: the collective mainloop computes S = Q K^T, then the online softmax.
#include "kernel/fmha_kernel.hpp"
using Kernel = FmhaKernelTmaWarpspecialized<CausalMask, OnlineSoftmax>;
int main() { return run_attention<Kernel>(); }
