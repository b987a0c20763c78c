#pragma once
// Which values of the composed module are channels-last: a chain of convolutions then keeps that order between its
// kernels, and each FACT kernel reads its x and residual in place instead of copying them channels-last first (a pass
// over every activation of a ResNet, read and written, per convolution). A FACT op writes channels-last, and the order
// flows on through PyTorch's ops that keep it (cuDNN's convolutions, BatchNorm, pooling, elementwise ops: `channels_last`
// in data/ir/aten_ops.json), as torch.compile's layout optimization does; a reader that needs PyTorch's order (a view,
// a FACT op that does not read it in place, the graph's results) gets the value made contiguous where it is defined.
#include <set>
#include <string>
#include <vector>

#include "compose/pattern_verdicts.h"
#include "discover/plan.h"

namespace fact::compose {

struct ChannelsLastPlan {
  // Anchors of the accepted ops asked to write channels-last (realize::ChannelsLast::writes): those whose value
  // reaches, through PyTorch's order-keeping ops, FACT ops reading more channels-last bytes in place than PyTorch's
  // order must be restored for afterwards.
  std::set<std::string> writes;
  // PyTorch ops' values that may be channels-last then and have a reader needing PyTorch's order: made contiguous
  // right after the op (a no-op where they are not channels-last).
  std::set<std::string> contiguous;
};

ChannelsLastPlan channels_last_plan(const discover::Plan& plan, const std::vector<PatternVerdict>& verdicts);

}  // namespace fact::compose
