// "scheme://host[:port][/path]" split into parts (ws, wss, http, https).
#pragma once

#include <string>

namespace voxgate {

struct Url {
  std::string scheme;
  std::string host;
  int port = 0;
  std::string path = "/";
  bool tls() const { return scheme == "wss" || scheme == "https"; }
};

bool ParseUrl(const std::string& text, Url* url);

}  // namespace voxgate
