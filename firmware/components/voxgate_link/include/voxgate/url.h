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
  // The HTTP Host header: the port is part of it unless it is the scheme's default (RFC 9110 7.2).
  // Servers build URLs from it (the OTA answer does), so leaving a non-default port out sends devices to port 80.
  std::string host_header() const {
    const int default_port = tls() ? 443 : 80;
    return port == 0 || port == default_port ? host : host + ":" + std::to_string(port);
  }
};

bool ParseUrl(const std::string& text, Url* url);

}  // namespace voxgate
