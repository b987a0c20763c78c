#pragma once
// The user's pattern registry: patterns the agent generated and verified, kept outside the source tree
// ($FACT_REGISTRY, default ~/.local/share/fact/registry) and matched by `fact discover` alongside
// data/rules. One folder per entry: rule.json (data/rules format), the kernel source, and record.json
// (arch, dtype, numerics, tuned config, verification and profile records, where it came from).
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "discover/pattern_registry.h"

namespace fact::discover {

inline constexpr int kRegistryEntryVersion = 1;

struct RegistryEntry {
  std::string name;                     // == the rule's name; also the folder name
  std::filesystem::path dir;
  nlohmann::json rule;                  // rule.json
  nlohmann::json record;                // record.json
  std::string kernel_source;            // the file record["kernel"]["source_file"] names
};

class UserRegistry {
 public:
  explicit UserRegistry(std::filesystem::path root) : root_(std::move(root)) {}
  static UserRegistry open_default();   // $FACT_REGISTRY, else $XDG_DATA_HOME or ~/.local/share, /fact/registry
  const std::filesystem::path& root() const { return root_; }

  // Entries in name order; a missing root is an empty registry. Throws Error naming a broken entry.
  std::vector<RegistryEntry> list() const;
  RegistryEntry get(const std::string& name) const;  // throws Error listing the known names
  bool contains(const std::string& name) const;
  // Validates the rule (parse_rule) and the record's required fields, then writes the entry
  // atomically (a temporary folder renamed into place); an existing entry of that name is replaced.
  std::filesystem::path add(const nlohmann::json& rule, const nlohmann::json& record, const std::string& kernel_source);
  // Copies entries (all when `name` is empty) under `dest`, one folder each.
  std::vector<std::filesystem::path> export_to(const std::filesystem::path& dest, const std::string& name = "") const;

  // The registry's rules, each with `file` set, for PatternRegistry::add.
  std::vector<Rule> rules() const;

 private:
  std::filesystem::path root_;
};

// data/rules plus the user registry's rules: what `fact discover` matches.
PatternRegistry builtin_and_user_rules();

}  // namespace fact::discover
