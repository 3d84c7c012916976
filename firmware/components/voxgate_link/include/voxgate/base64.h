// Base64 (RFC 4648, with padding) from the platform's crypto library:
// mbedTLS on the device (esp/mbedtls_base64.cc), OpenSSL on the host
// (host/openssl_base64.cc).
#pragma once

#include <string>

namespace voxgate {

std::string Base64Encode(const std::string& bytes);

}  // namespace voxgate
