#pragma once
// The CUTLASS 2.x epilogues FACT renders for sm80, and which epilogue trees each expresses:
//   universal: [act](beta * C + alpha * acc [+ bias[N]])  -> a thread::LinearCombination* output op
//              (gemm_sm80_universal.cu.in; the bias rides in as C with ldc = 0, so C itself is then not read)
//   broadcast: [act](alpha * acc + bias[N]) (+ or *) residual -> the broadcast epilogue
//              (gemm_sm80_broadcast.cu.in: LinearCombinationResidualBlock)
// Any other tree has no 2.x form yet: sm80_epilogue throws Error saying so, and the pattern stays PyTorch's.
#include <optional>
#include <string>

#include "realize/families/gemm/epilogue_tree.h"

namespace fact::realize {

struct Sm80Epilogue {
  bool broadcast = false;   // gemm_sm80_broadcast.cu.in, else gemm_sm80_universal.cu.in
  std::string activation;   // the table name, "" for none
  std::string output_op;    // universal: the output operator template (Out, Count, Acc, Compute)
  std::string activation_op;  // broadcast: the activation functor (Identity for none)
  std::string combine_op;     // broadcast: how the residual joins (cutlass::plus, cutlass::multiplies)
};

// fp32_accurate picks FACT's activation functors where the table has them.
Sm80Epilogue sm80_epilogue(const EpilogueTree& tree, bool fp32_accurate);
// Why the tree has no 2.x form, nullopt when it has one.
std::optional<std::string> sm80_epilogue_rejection(const EpilogueTree& tree);

}  // namespace fact::realize
