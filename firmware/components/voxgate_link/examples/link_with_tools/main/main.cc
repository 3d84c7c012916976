// voxgate_link example: join a Voxgate gateway and offer one MCP tool.
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "esp_event.h"
#include "esp_log.h"
#include "esp_mac.h"
#include "esp_netif.h"
#include "esp_random.h"
#include "esp_system.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "nvs_flash.h"
#include "protocol_examples_common.h"
#include "sdkconfig.h"

#include "esp_link_boot.h"
#include "esp_protocols.h"
#include "mcp/mcp_server.h"

namespace {

const char* const kTag = "example";

voxgate::DeviceIdentity Identity() {
  uint8_t mac[6] = {};
  esp_read_mac(mac, ESP_MAC_WIFI_STA);
  char text[18];
  snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
  uint8_t random[16];
  esp_fill_random(random, sizeof random);  // a product keeps this client id in NVS across reboots
  return voxgate::DeviceIdentity{text, voxgate::UuidFromBytes(random)};
}

}  // namespace

extern "C" void app_main() {
  ESP_ERROR_CHECK(nvs_flash_init());
  ESP_ERROR_CHECK(esp_netif_init());
  ESP_ERROR_CHECK(esp_event_loop_create_default());
  ESP_ERROR_CHECK(example_connect());  // your app's own Wi-Fi code goes here

  // Where to connect: the OTA check, with the last good answer (NVS) served
  // when it fails (see esp_link_boot.h).
  voxgate::EspLinkBootOptions boot_options;
  boot_options.ota.url = CONFIG_EXAMPLE_VOXGATE_OTA_URL;
  boot_options.ota.identity = Identity();
  boot_options.on_activation = [](voxgate::ActivationState state, const voxgate::OtaActivation& activation) {
    // Show the code on your display; an operator approves it on the gateway.
    ESP_LOGW(kTag, "activation %s %s", voxgate::ActivationStateName(state), activation.code.c_str());
  };
  static voxgate::EspLinkBoot boot(std::move(boot_options));
  const voxgate::LinkConfig& link = boot.Resolve();

  // 1. The MCP server and your tools.
  static mcp::McpServer server(mcp::ServerOptions{"example-board", "0.1.0", 8000, {}});
  server.AddTool("self.example.blink", "Blink the status LED a number of times.",
                 {mcp::Property::Integer("times", "How many blinks").Range(1, 10)}, [](const mcp::Arguments& args) {
                   ESP_LOGI(kTag, "blink x%d", static_cast<int>(args.GetInt("times")));
                   return mcp::ToolResult::Bool(true);
                 });

  // 2. The link, with incoming frames handled on a worker task of their own.
  static std::unique_ptr<mcp::Worker> link_worker = mcp::Worker::Create(mcp::WorkerOptions{"vx_link", 8192, 3, 8});
  static std::unique_ptr<voxgate::EspProtocol> protocol = boot.CreateProtocol(link.has_mqtt);
  voxgate::ProtocolEvents events;
  events.on_mcp = [](const std::string& payload) { server.ParseMessage(payload); };
  protocol->SetEvents(events);
  protocol->SetDispatcher([](std::function<void()> job) { return link_worker->Post(std::move(job)); });

  // 3. Join them.
  server.SetSender([](const std::string& json) { protocol->SendMcp(json); });
  protocol->Start();

  for (;;) {  // hello deadline and reconnects
    if (!protocol->connected() && boot.Moved()) esp_restart();  // the gateway moved this device
    protocol->Service();
    vTaskDelay(pdMS_TO_TICKS(100));
  }
}
