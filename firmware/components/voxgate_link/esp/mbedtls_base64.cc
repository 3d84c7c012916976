// ESP only: Base64 with mbedTLS's encoder.
#include "mbedtls/base64.h"

#include "voxgate/base64.h"

namespace voxgate {

std::string Base64Encode(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');  // mbedtls_base64_encode adds a NUL
  size_t written = 0;
  if (mbedtls_base64_encode(reinterpret_cast<unsigned char*>(&out[0]), out.size(), &written,
                            reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()) != 0) {
    return "";
  }
  out.resize(written);
  return out;
}

}  // namespace voxgate
