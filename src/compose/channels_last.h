#pragma once
// Which FACT ops of the composed module write their result channels-last: a chain of convolutions then keeps that
// order between its kernels, and each kernel reads its x and residual in place instead of copying them
// channels-last first (a pass over every activation of a ResNet, read and written, per convolution).
#include <set>
#include <string>
#include <vector>

#include "compose/pattern_verdicts.h"
#include "discover/plan.h"

namespace fact::compose {

// The anchors of the accepted ops whose family writes channels-last (realize::ChannelsLast::writes) and whose
// value is read only by accepted ops that take it in place (each binds it only to operands its family reads
// channels-last); a value the graph returns, or any PyTorch op reads, stays in PyTorch's order.
std::set<std::string> channels_last_anchors(const discover::Plan& plan, const std::vector<PatternVerdict>& verdicts);

}  // namespace fact::compose
