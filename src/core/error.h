#pragma once
// FACT reports bad input as an Error whose message names the input, the reason and, where known, the fix.
#include <stdexcept>
#include <string>

namespace fact {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace fact
