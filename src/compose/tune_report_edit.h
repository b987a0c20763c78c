#pragma once
// Gating after tuning: a tune report in which some winners lose (the op library did not build, an op was
// missing when the library loaded, the composed module failed or was slower end to end). The composer
// then keeps PyTorch's ops for them, and the row's status and message say why.
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace fact::compose {

// The op name a winning row becomes (its family's KernelFamily::op_name of the winner: gemm_<id>, norm_<id>,
// ...), or "" for a row without a winning config or a known "family".
std::string winning_op(const nlohmann::json& row);

// A copy of `report` whose rows with a winning op in `ops` (every winning row when `ops` is empty) get
// config null, winner "torch", and the given status and message; their measured times stay.
nlohmann::json reject_winners(const nlohmann::json& report, const std::set<std::string>& ops,
                              const std::string& status, const std::string& message);

// Whether any row of the report has a winning config.
bool has_winners(const nlohmann::json& report);

}  // namespace fact::compose
