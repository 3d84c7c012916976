// ESP only: factories for the ESP-IDF transports (esp_websocket_client, mqtt)
// and the NVS-backed config store. Same Protocol interface as the host ones.
#pragma once

#include <memory>
#include <string>

#include "voxgate/device_identity.h"
#include "voxgate/ota_config.h"
#include "voxgate/protocol.h"

namespace voxgate {

// `Service()` must be called every ~100 ms (hello deadline, reconnect delays);
// app_main's loop does it.
class EspProtocol : public Protocol {
 public:
  using Protocol::Protocol;
  virtual void Service() = 0;
};

std::unique_ptr<EspProtocol> CreateEspWebSocketProtocol(const WebSocketConfig& config, const DeviceIdentity& identity);
std::unique_ptr<EspProtocol> CreateEspMqttProtocol(const MqttConfig& config, const DeviceIdentity& identity);

// The link config in NVS (namespace "voxgate", key "link").
std::unique_ptr<ConfigStore> CreateNvsConfigStore();

}  // namespace voxgate
