#pragma once
// What every config space does after enumerating: keep the best by score, and when none is left, name the
// commonest reason configs were rejected.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace fact::realize {

// Tiles (CTAs, waves) needed to cover `a` items `b` at a time.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The configs by score, best first (ties keep enumeration order), at most top_n.
template <class Config>
std::vector<Config> best_first(std::vector<std::pair<double, Config>> scored, size_t top_n) {
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<Config> out;
  for (auto& [score, config] : scored) {
    if (out.size() >= top_n) break;
    out.push_back(std::move(config));
  }
  return out;
}

// The reason that rejected the most configs (the first in name order on a tie), or "none enumerated".
inline std::string commonest_reason(const std::map<std::string, int>& reasons) {
  auto it = std::max_element(reasons.begin(), reasons.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  return it == reasons.end() ? "none enumerated" : it->first;
}

}  // namespace fact::realize
