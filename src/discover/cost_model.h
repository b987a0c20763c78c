#pragma once
// Roofline cost model: FLOPs and minimum bytes of each ATen node and of each match, the estimated
// time of PyTorch running the nodes one kernel at a time now, and of one fused FACT kernel, from the
// architecture's measured ceilings. The plan is ranked by the difference (expected gain).
#include <string>

#include "core/arch_spec.h"
#include "core/vocabulary.h"
#include "discover/match.h"
#include "ir/graph.h"

namespace fact::discover {

struct CostContext {
  const ir::Graph& graph;  // its nodes carry their op category (FACT's table, else PyTorch's tags)
  const ArchSpec& arch;
  Numerics numerics;
  Numerics conv_numerics = Numerics::tf32;  // an fp32 plan's convolutions (Plan::conv_numerics)
};

struct NodeCost {
  double flops = 0;
  double bytes = 0;     // inputs read once + outputs written once
  double seconds = 0;   // PyTorch's estimated time for this node (0 for free views)
  int kernels = 0;      // kernel launches PyTorch makes for it
};

struct CostEstimate {
  double flops = 0;
  double bytes_now = 0;     // bytes PyTorch moves over all covered nodes
  double bytes_fused = 0;   // minimum bytes: the match's external inputs and its outputs (extra ones too), once
  double seconds_now = 0;
  double seconds_fused = 0;
  int kernels_now = 0;
  std::string bound;        // "compute" or "memory" for the fused kernel
  double gain_seconds() const { return seconds_now - seconds_fused; }
  double speedup() const { return seconds_fused > 0 ? seconds_now / seconds_fused : 0; }
};

NodeCost estimate_node(const ir::Node& node, const CostContext& ctx);
CostEstimate estimate_match(const Match& match, const CostContext& ctx);
// Sum of estimate_node over every op node: the whole module's estimated time in PyTorch now.
double estimate_graph_seconds(const CostContext& ctx);

}  // namespace fact::discover
