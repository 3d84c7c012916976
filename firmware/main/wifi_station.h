// ESP only: Wi-Fi station that reconnects by itself (exponential backoff).
#pragma once

#include <cstdint>
#include <string>

class WifiStation {
 public:
  bool Start(const std::string& ssid, const std::string& password);
  // True once the station has an IP address (waits up to timeout_ms).
  bool WaitConnected(uint32_t timeout_ms);
  std::string MacAddress();  // "aa:bb:cc:dd:ee:ff"
};
