#include "core/sha256.h"

#include <openssl/evp.h>

#include <fmt/format.h>

#include "core/error.h"

namespace fact {

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) != 1)
    throw Error("SHA-256 failed (OpenSSL EVP_Digest)");
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

}  // namespace fact
