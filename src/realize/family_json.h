#pragma once
// Reading a family's problem or config back from JSON (tuning records, tune reports): a missing or mistyped
// field becomes an Error that names what was read and what writes it, the same way for every family.
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace fact::realize {

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
