#pragma once
// Checks a pattern ({nodes, output, extra_outputs}) against docs/rule-format.md, so that a rule or fragment
// file with a typo fails when it is loaded, naming the field, instead of never matching.
#include <string>

#include <nlohmann/json.hpp>

namespace fact::discover {

// Throws Error starting with `where` (the file and rule or fragment) and naming the node and field at fault.
void check_pattern(const nlohmann::json& pattern, const std::string& where);

// doc[field] as a string; throws Error naming `where` and the field when it is missing or not a string.
std::string string_field(const nlohmann::json& doc, const char* field, const std::string& where);

}  // namespace fact::discover
