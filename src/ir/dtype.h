#pragma once
// Torch dtype short names the IR accepts, and their element sizes.
#include <cstdint>
#include <string>

namespace fact::ir {

bool is_known_dtype(const std::string& dtype);
// Bytes per element; throws Error naming the dtype if unknown.
int64_t dtype_bytes(const std::string& dtype);

}  // namespace fact::ir
