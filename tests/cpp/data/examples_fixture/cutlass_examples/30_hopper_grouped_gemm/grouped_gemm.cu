// Grouped GEMM on Hopper: many GEMMs of different problem sizes in one launch (mixture of experts).
using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GroupedGemmKernel>;
