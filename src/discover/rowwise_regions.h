#pragma once
// The generated row-wise pass of make_plan: every maximal connected region of pointwise ops and trailing-dim
// reductions that no rule covered becomes a plan entry realized by a kernel generated from its IR (family
// "rowwise", kernel kind "ir"); a region that cannot be generated stays PyTorch's with a note saying why.
#include "discover/cost_model.h"

namespace fact::discover {

struct Plan;

void add_generated_rowwise_entries(Plan& plan, const CostContext& ctx);

}  // namespace fact::discover
