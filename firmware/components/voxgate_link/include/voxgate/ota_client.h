// The OTA config request: POST the device's system info (JSON) to the OTA
// URL with Device-Id/Client-Id headers and read where to connect. Blocking.
// ESP: esp_http_client (esp/esp_ota_client.cc); host: libwebsockets
// (host/lws_ota_client.cc).
#pragma once

#include <string>

#include "voxgate/device_identity.h"
#include "voxgate/ota_config.h"

namespace voxgate {

bool FetchOtaConfig(const std::string& url, const DeviceIdentity& identity, const SystemInfo& info,
                    LinkConfig* config, std::string* error);

}  // namespace voxgate
