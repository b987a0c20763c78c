#pragma once
// Warp-specialized attention kernel: producer warps issue TMA, consumer warps run WGMMA and softmax.
template <class Mask, class Softmax> struct FmhaKernelTmaWarpspecialized { Mask mask; Softmax softmax; };
