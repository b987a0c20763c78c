#pragma once
// The kernels' example index: CUTLASS's own examples (read in place from the installed wheel) and FACT's
// vetted kernels, searchable by text (BM25) and filtered by architecture. Discover uses it to turn a
// rule's example refs into files, and `fact examples search` lets a person browse it.
#include <filesystem>
#include <string>
#include <vector>

#include "discover/bm25_index.h"
#include "discover/example_catalog.h"

namespace fact::discover {

struct ExampleHit {
  std::string ref;                  // "cutlass:88_hopper_fmha", "fact:<name>"
  std::string title;
  std::filesystem::path path;
  std::vector<std::string> arch;
  std::string family;
  std::vector<std::string> dtypes;
  std::string epilogue;
  double score = 0;                 // BM25 of the body plus a weighted BM25 of title, name and tags
  std::string snippet;              // the README/source line sharing most terms with the query; may be empty
};

class ExampleIndex {
 public:
  // Indexes every numbered folder under `cutlass_examples_dir` (empty path: no CUTLASS examples) with
  // fact_home/data/examples/cutlass_examples.json, and the kernels in fact_home/data/examples/fact_kernels.json.
  // `arch` ("" for all) and `match` decide what search() returns; find() and resolve_refs() see every entry.
  static ExampleIndex build(const std::filesystem::path& cutlass_examples_dir,
                            const std::filesystem::path& fact_home, const std::string& arch,
                            ArchMatch match = ArchMatch::exact);
  // build(cutlass_dir()/examples, fact_home(), arch, match).
  static ExampleIndex builtin(const std::string& arch, ArchMatch match = ArchMatch::exact);

  // Best `top_k` entries for `query` among those for this index's arch (and `family`, when given),
  // highest score first; ties go to the smaller ref. Entries sharing no term with the query are left out.
  std::vector<ExampleHit> search(const std::string& query, size_t top_k = 5, const std::string& family = "") const;
  const ExampleEntry* find(const std::string& ref) const;  // nullptr when unknown
  // The entry for each ref, in order; throws Error for a malformed or unknown ref, naming the nearest refs.
  std::vector<const ExampleEntry*> resolve_refs(const std::vector<std::string>& refs) const;

  const std::vector<ExampleEntry>& entries() const { return entries_; }
  const std::string& arch() const { return arch_; }
  bool selects(const ExampleEntry& entry) const;  // whether search() may return it (arch filter)

 private:
  std::vector<ExampleEntry> entries_;
  std::string arch_;
  ArchMatch match_ = ArchMatch::exact;
  Bm25Index body_;   // README and sources
  Bm25Index head_;   // ref name, title, family, epilogue, dtypes, tags, arch and generation words
};

}  // namespace fact::discover
