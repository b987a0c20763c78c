#include "discover/bm25_index.h"

#include <cmath>
#include <set>

namespace fact::discover {

size_t Bm25Index::add(const std::vector<std::string>& tokens) {
  auto doc = static_cast<uint32_t>(lengths_.size());
  std::unordered_map<std::string, uint32_t> counts;
  for (const auto& t : tokens) ++counts[t];
  for (auto& [term, count] : counts) postings_[term].push_back({doc, count});
  lengths_.push_back(static_cast<uint32_t>(tokens.size()));
  total_length_ += tokens.size();
  return doc;
}

size_t Bm25Index::document_frequency(const std::string& term) const {
  auto it = postings_.find(term);
  return it == postings_.end() ? 0 : it->second.size();
}

std::vector<double> Bm25Index::score(const std::vector<std::string>& query) const {
  std::vector<double> scores(lengths_.size(), 0.0);
  if (lengths_.empty()) return scores;
  double n = static_cast<double>(lengths_.size());
  double average_length = std::max(1.0, static_cast<double>(total_length_) / n);
  for (const auto& term : std::set<std::string>(query.begin(), query.end())) {
    auto it = postings_.find(term);
    if (it == postings_.end()) continue;
    double df = static_cast<double>(it->second.size());
    double idf = std::log(1.0 + (n - df + 0.5) / (df + 0.5));
    for (const auto& p : it->second) {
      double tf = p.count;
      double norm = params_.k1 * (1.0 - params_.b + params_.b * lengths_[p.doc] / average_length);
      scores[p.doc] += idf * tf * (params_.k1 + 1.0) / (tf + norm);
    }
  }
  return scores;
}

}  // namespace fact::discover
