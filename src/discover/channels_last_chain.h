#pragma once
// Where channels-last order can flow in a graph: through the ops that run on a channels-last tensor as it is and
// write channels-last (elementwise ops and those data/ir/aten_ops.json marks `channels_last`: cuDNN's convolutions,
// BatchNorm, pooling), as torch.compile's layout optimization lets it. The composer's channels-last plan
// (compose/channels_last.h) follows it between accepted ops; the tuner asks it beforehand which patterns a chain
// of their family's ops feeds, so that it tunes them on the layout they will be handed.
#include <cstddef>
#include <functional>

#include "discover/plan.h"
#include "ir/graph.h"

namespace fact::discover {

// Whether a PyTorch op runs on a channels-last input as it is (its result then channels-last too).
bool keeps_channels_last(const ir::Node& node);

// Whether the operand "x" of plan entry `entry` is the value of another entry of the same family that `chains`
// (writes channels-last), itself or through order-keeping ops no other entry's value stands between: a chain of such
// ops (a ResNet's convolutions; not after a grouped convolution's direct kernel) that can hand it over channels-last.
bool fed_by_own_family(const Plan& plan, size_t entry, const std::function<bool(size_t)>& chains);

}  // namespace fact::discover
