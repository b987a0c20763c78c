#pragma once
// What every config space does after enumerating: keep the best by score, and when none is left, name the
// commonest reason configs were rejected.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace fact::realize {

// Tiles (CTAs, waves) needed to cover `a` items `b` at a time.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The reason that rejected the most configs (the first in name order on a tie), or "none enumerated".
inline std::string commonest_reason(const std::map<std::string, int>& reasons) {
  auto it = std::max_element(reasons.begin(), reasons.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  return it == reasons.end() ? "none enumerated" : it->first;
}

// A config space for one problem: how many configs were enumerated, and the ones kept, best first.
template <class Config>
struct ConfigSpace {
  int enumerated = 0;
  std::vector<Config> ranked;  // best first
};

// Collects a family's enumeration (each config rejected with a reason or kept with a score) and ranks it.
template <class Config>
class ConfigRanking {
 public:
  // One enumerated config: counted under `why` when that is set, else kept with score() (higher is better;
  // not called for rejected configs). Configs of different groups take turns in the ranking.
  template <class Score>
  void add(const Config& config, const std::string& why, Score&& score, size_t group = 0) {
    ++enumerated_;
    if (!why.empty()) {
      ++reasons_[why];
      return;
    }
    if (groups_.size() <= group) groups_.resize(group + 1);
    groups_[group].emplace_back(score(), config);
  }

  // At most top_n kept configs: each group's best first (ties keep enumeration order), the groups taking
  // turns (every group's best, then every group's second, ...) so that a short top_n still covers each group.
  // Throws Error "<none_left>; commonest reason: <reason>" when no config is kept.
  ConfigSpace<Config> ranked(int top_n, const std::string& none_left) const {
    auto groups = groups_;
    for (auto& g : groups)
      std::stable_sort(g.begin(), g.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    ConfigSpace<Config> space;
    space.enumerated = enumerated_;
    for (size_t rank = 0, taken = 1; taken > 0; ++rank) {
      taken = 0;
      for (const auto& g : groups)
        if (rank < g.size() && static_cast<int>(space.ranked.size()) < top_n) {
          space.ranked.push_back(g[rank].second);
          ++taken;
        }
    }
    if (space.ranked.empty()) throw Error(none_left + "; commonest reason: " + commonest_reason(reasons_));
    return space;
  }

 private:
  int enumerated_ = 0;
  std::map<std::string, int> reasons_;
  std::vector<std::vector<std::pair<double, Config>>> groups_;
};

}  // namespace fact::realize
