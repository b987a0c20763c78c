// Convolution forward propagation (fprop) on Blackwell tensor cores: implicit GEMM over NHWC tensors.
using Conv = cutlass::conv::device::ConvUniversalAdapter<ConvKernel>;
