#pragma once
// Okapi BM25 over token lists: the text-retrieval score behind the example index.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace fact::discover {

struct Bm25Params {
  double k1 = 1.2;   // term-frequency saturation
  double b = 0.75;   // document-length normalization (0: none, 1: full)
};

class Bm25Index {
 public:
  explicit Bm25Index(Bm25Params params = {}) : params_(params) {}
  // Adds one document; documents are numbered 0, 1, ... in the order added.
  size_t add(const std::vector<std::string>& tokens);
  // One score per document. Repeated query terms count once; idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
  // which stays positive for terms found in most documents.
  std::vector<double> score(const std::vector<std::string>& query) const;
  size_t size() const { return lengths_.size(); }
  // Number of documents that hold `term`.
  size_t document_frequency(const std::string& term) const;

 private:
  struct Posting {
    uint32_t doc;
    uint32_t count;
  };
  Bm25Params params_;
  std::unordered_map<std::string, std::vector<Posting>> postings_;
  std::vector<uint32_t> lengths_;
  uint64_t total_length_ = 0;
};

}  // namespace fact::discover
