// One simulated device: the board tools on fake hardware, synthetic tools,
// an MCP server and a link, with every event printed as a JSON line.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "fake_board.h"
#include "lws_loop.h"
#include "mcp/mcp_server.h"
#include "voxgate/device_identity.h"
#include "voxgate/ota_config.h"
#include "voxgate/protocol.h"

namespace sim {

struct DeviceOptions {
  voxgate::DeviceIdentity identity;
  voxgate::LinkConfig link;  // which transport and where
  int extra_tools = 0;
  uint32_t tool_latency_ms = 0;
  size_t page_budget = 8000;
  uint32_t seed = 1;
  uint32_t reconnect_max_ms = 5000;
  std::string app_version = "0.1.0";  // the firmware version (serverInfo.version)
  bool mqtt_tls = false;              // MQTT over TLS whatever the port (the device: port 8883 only)
  // Called with every MCP text from the gateway after the server handled it (firmware boot confirmation).
  std::function<void(const std::string& payload)> on_mcp_handled;
};

class SimDevice {
 public:
  SimDevice(DeviceOptions options, std::shared_ptr<voxgate::LwsLoop> loop);
  ~SimDevice();

  bool Start();
  void Stop();
  // Sends a device notification (from the stdin `notify` command).
  void Notify(const std::string& method, cJSON* params);
  const std::string& id() const { return options_.identity.mac; }

 private:
  void OnIncoming(const std::string& payload);
  void OnOutgoing(const std::string& payload, bool sent);

  DeviceOptions options_;
  FakeBoard board_;
  mcp::McpServer server_;
  std::unique_ptr<voxgate::Protocol> link_;
};

}  // namespace sim
