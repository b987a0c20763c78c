#pragma once
// Pattern fragments (data/rules/fragments/<name>.json): pieces of pattern several rules share, such as the
// linear-or-addmm GEMM node or SiLU written as x * sigmoid(x). A rule names one where it would write the
// nodes out; parsing the rule expands it, so the matcher only ever sees written-out nodes.
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace fact::discover {

class FragmentLibrary {
 public:
  // Every *.json under `dir`, named by file stem (no folder: no fragments). Each is checked, with the
  // fragments it uses expanded, so a broken fragment fails here, naming its file.
  static FragmentLibrary load(const std::filesystem::path& dir);
  static FragmentLibrary builtin();  // data_dir()/rules/fragments

  // `pattern` with each fragment use replaced by the fragment's nodes (docs/rule-format.md, "Fragments");
  // `where` names the rule in errors.
  nlohmann::json expand(const nlohmann::json& pattern, const std::string& where) const;

 private:
  struct Fragment {
    nlohmann::json nodes;        // expanded: no fragment uses left
    std::string output;          // the node a use's id renames
    std::set<std::string> vars;  // the $vars a use may rename
  };
  using Lookup = std::function<const Fragment&(const std::string& name, const std::string& at)>;

  // One fragment file, checked, its own fragment uses expanded through `lookup`.
  static Fragment parse(const std::filesystem::path& file, const Lookup& lookup);
  static nlohmann::json expand_nodes(const nlohmann::json& nodes, const std::string& where, const Lookup& lookup);

  std::filesystem::path dir_;
  std::map<std::string, Fragment> fragments_;
};

}  // namespace fact::discover
