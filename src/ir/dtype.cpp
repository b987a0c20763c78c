#include "ir/dtype.h"

#include <map>

#include "core/error.h"

namespace fact::ir {

static const std::map<std::string, int64_t>& dtype_sizes() {
  static const std::map<std::string, int64_t> sizes = {
      {"float64", 8}, {"float32", 4}, {"float16", 2}, {"bfloat16", 2}, {"float8_e4m3fn", 1},
      {"float8_e5m2", 1}, {"int64", 8}, {"int32", 4}, {"int16", 2}, {"int8", 1}, {"uint8", 1},
      {"bool", 1}, {"complex64", 8}, {"complex128", 16}};
  return sizes;
}

bool is_known_dtype(const std::string& dtype) { return dtype_sizes().count(dtype) > 0; }

int64_t dtype_bytes(const std::string& dtype) {
  auto it = dtype_sizes().find(dtype);
  if (it == dtype_sizes().end())
    throw Error("unknown dtype '" + dtype + "'; the IR uses torch short names (float32, bfloat16, int64, ...)");
  return it->second;
}

}  // namespace fact::ir
