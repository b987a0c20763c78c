#pragma once
// A family's problem and config JSON, the same way for every family: a config's JSON names its family, and
// reading one back (tuning records, tune reports) turns a missing or mistyped field into an Error that names
// what was read and what writes it.
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace fact::realize {

// A config's JSON: its fields (the type's to_json, e.g. NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE) and "family".
template <class Config>
nlohmann::json family_config_json(const Config& config, const char* family) {
  nlohmann::json j = config;
  j["family"] = family;
  return j;
}

// parse() (which reads with j.at(...)); nlohmann's exceptions become Error("<what> JSON: <reason>; expected the
// fields written by <writer>").
template <class Parse>
auto parse_family_json(const char* what, const char* writer, Parse&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string(what) + " JSON: " + e.what() + "; expected the fields written by " + writer);
  }
}

}  // namespace fact::realize
