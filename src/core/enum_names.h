#pragma once
// Text forms of enums: each enum has one table (value, name), read both ways here.
#include <array>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace fact {

template <class E, size_t N>
using EnumNames = std::array<std::pair<E, const char*>, N>;

template <class E, size_t N>
std::string enum_name(const EnumNames<E, N>& table, E v) {
  for (auto& [e, s] : table)
    if (e == v) return s;
  return "?";
}

// Every name of the table, in table order.
template <class E, size_t N>
std::vector<std::string> enum_names(const EnumNames<E, N>& table) {
  std::vector<std::string> names;
  for (auto& [e, name] : table) names.push_back(name);
  return names;
}

// Throws Error naming `what`, the bad text and the accepted names.
template <class E, size_t N>
E parse_enum(const EnumNames<E, N>& table, const std::string& s, const std::string& what) {
  for (auto& [e, name] : table)
    if (s == name) return e;
  throw Error(fmt::format("unknown {} '{}': use one of {}", what, s, fmt::join(enum_names(table), ", ")));
}

}  // namespace fact
