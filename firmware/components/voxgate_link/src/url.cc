#include "voxgate/url.h"

#include <cstdlib>

namespace voxgate {

bool ParseUrl(const std::string& text, Url* url) {
  const size_t sep = text.find("://");
  if (sep == std::string::npos) return false;
  Url out;
  out.scheme = text.substr(0, sep);
  if (out.scheme == "ws" || out.scheme == "http") {
    out.port = 80;
  } else if (out.scheme == "wss" || out.scheme == "https") {
    out.port = 443;
  } else {
    return false;
  }
  const size_t host_start = sep + 3;
  const size_t slash = text.find('/', host_start);
  std::string authority = text.substr(host_start, slash == std::string::npos ? std::string::npos : slash - host_start);
  if (slash != std::string::npos) out.path = text.substr(slash);
  const size_t colon = authority.rfind(':');
  if (colon != std::string::npos && authority.find(']') == std::string::npos) {
    const std::string digits = authority.substr(colon + 1);
    char* end = nullptr;
    const long port = strtol(digits.c_str(), &end, 10);
    if (digits.empty() || *end != '\0' || port <= 0 || port > 65535) return false;
    out.port = static_cast<int>(port);
    authority.resize(colon);
  }
  out.host = authority;
  if (out.host.empty()) return false;
  *url = out;
  return true;
}

}  // namespace voxgate
