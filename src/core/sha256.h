#pragma once
// SHA-256 as hex: the content hash of the kernel build cache, of the rendered kernel_abi.h's folder, and of
// the problem files a resumed benchmark suite recognizes.
#include <string>

namespace fact {

// Lower-case hex SHA-256 of `data` (OpenSSL). Throws Error only if OpenSSL fails.
std::string sha256_hex(const std::string& data);

}  // namespace fact
