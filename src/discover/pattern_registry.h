#pragma once
// The pattern registry: rule files under data/rules/ (one JSON file per rule), keyed by
// rule x dtype x architecture. Adding a rule is adding a file; no matcher code changes.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "discover/pattern_fragments.h"

namespace fact::discover {

struct Rule {
  std::string name;
  std::string description;
  std::string family;
  std::vector<std::string> dtypes;   // e.g. float32, bfloat16, float16
  std::vector<std::string> archs;    // e.g. sm80, sm90
  int priority = 0;
  nlohmann::json pattern;            // graph fragment, fragment uses expanded (interpreted by the matcher)
  nlohmann::json dims;               // name -> expression
  std::vector<std::string> constraints; // boolean expressions over dims and arch constants
  nlohmann::json kernel;             // how stage 2 realizes it
  std::vector<std::string> examples; // example-index references
  std::vector<std::vector<std::string>> example_archs;  // parallel to examples: archs each suits (empty: all)
  std::filesystem::path file;        // where it was loaded from
};

class PatternRegistry {
 public:
  // Loads every *.json directly under `dir` (sorted by file name) with the fragments of dir/fragments, or of
  // data/rules/fragments when `dir` has none; throws Error naming the file and field at fault.
  static PatternRegistry load(const std::filesystem::path& dir);
  static PatternRegistry builtin();  // data_dir()/rules
  const std::vector<Rule>& rules() const { return rules_; }
  const Rule* find(const std::string& name) const;
  // Rules that apply to this dtype and architecture.
  std::vector<const Rule*> select(const std::string& dtype, const std::string& arch) const;
  void add(Rule rule);  // throws Error on a duplicate name
 private:
  std::vector<Rule> rules_;
};

// `fragments` expands the pattern's fragment uses; without it, those of data/rules/fragments.
Rule parse_rule(const nlohmann::json& doc, const std::string& origin, const FragmentLibrary& fragments);
Rule parse_rule(const nlohmann::json& doc, const std::string& origin);

}  // namespace fact::discover
