#pragma once
// Element strides of a [batch, heads, seq, head_dim] view whose head_dim is contiguous: how attention reads
// q/k/v and rope reads x and its cos/sin tables in place (a stride of 0 broadcasts that dim).
#include <cstdint>

#include <nlohmann/json.hpp>

namespace fact::realize {

struct HeadStrides {
  int64_t batch = 0, head = 0, row = 0;  // row: between positions of the sequence
  bool operator==(const HeadStrides&) const = default;
};

// [batch, head, row] in problem JSON.
inline nlohmann::json strides_json(const HeadStrides& s) { return nlohmann::json::array({s.batch, s.head, s.row}); }
inline HeadStrides strides_from_json(const nlohmann::json& j) { return {j.at(0), j.at(1), j.at(2)}; }

}  // namespace fact::realize
