// app_main: NVS, Wi-Fi, OTA config, the MCP server with the board tools, the
// link to the gateway, and the button.
#include <memory>
#include <string>

#include "esp_app_desc.h"
#include "esp_idf_version.h"
#include "esp_log.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "sdkconfig.h"

#include "board_tools.h"
#include "button.h"
#include "esp_board_hardware.h"
#include "esp_firmware_update.h"
#include "esp_protocols.h"
#include "mcp/mcp_server.h"
#include "nvs_settings.h"
#include "voxgate/ota_client.h"
#include "wifi_station.h"

namespace {

const char* const kTag = "voxgate";

// Asks the gateway where to connect; keeps the answer in NVS, and falls back
// to the last answer (or the Kconfig URL) when the gateway cannot be reached.
voxgate::LinkConfig ResolveLink(const voxgate::DeviceIdentity& identity, const voxgate::SystemInfo& info) {
  auto store = voxgate::CreateNvsConfigStore();
  voxgate::LinkConfig link;
  std::string error;
  if (voxgate::FetchOtaConfig(CONFIG_VOXGATE_OTA_URL, identity, info, &link, &error)) {
    voxgate::SaveLinkConfig(*store, link);
    return link;
  }
  ESP_LOGW(kTag, "OTA request failed (%s); using the stored config", error.c_str());
  if (!voxgate::LoadLinkConfig(*store, &link) && CONFIG_VOXGATE_FALLBACK_WEBSOCKET_URL[0] != '\0') {
    link.has_websocket = true;
    link.websocket.url = CONFIG_VOXGATE_FALLBACK_WEBSOCKET_URL;
  }
  return link;
}

bool UseMqtt(const voxgate::LinkConfig& link) {
#if defined(CONFIG_VOXGATE_TRANSPORT_MQTT)
  return true;
#elif defined(CONFIG_VOXGATE_TRANSPORT_WEBSOCKET)
  return false;
#else
  return link.has_mqtt;  // as the reference firmware: an mqtt section wins
#endif
}

}  // namespace

extern "C" void app_main() {
  NvsSettings::InitFlash();
  voxgate::EspFirmwareUpdate::ArmRollbackDeadline();  // a new image that never gets going is rolled back
  static NvsSettings settings;
  static EspBoardHardware board(settings, CONFIG_VOXGATE_LED_GPIO, CONFIG_VOXGATE_BACKLIGHT_GPIO,
#if defined(CONFIG_VOXGATE_BACKLIGHT_INVERTED)
                                true
#else
                                false
#endif
  );
  board.Init();

  static WifiStation wifi;
  wifi.Start(CONFIG_VOXGATE_WIFI_SSID, CONFIG_VOXGATE_WIFI_PASSWORD);
  while (!wifi.WaitConnected(10000)) ESP_LOGW(kTag, "waiting for Wi-Fi \"%s\"", CONFIG_VOXGATE_WIFI_SSID);

  const esp_app_desc_t* app = esp_app_get_description();
  voxgate::DeviceIdentity identity{wifi.MacAddress(), settings.ClientUuid()};
  voxgate::SystemInfo info;
  info.chip_model = CONFIG_IDF_TARGET;
  info.board_name = CONFIG_VOXGATE_BOARD_NAME;
  info.app_version = app->version;
  info.idf_version = esp_get_idf_version();
  ESP_LOGI(kTag, "device %s client %s", identity.mac.c_str(), identity.uuid.c_str());

  voxgate::LinkConfig link = ResolveLink(identity, info);
  const bool mqtt = UseMqtt(link);
  if (mqtt && link.mqtt.client_id.empty()) link.mqtt.client_id = voxgate::MqttClientId("voxgate", identity);

  static mcp::McpServer server(mcp::ServerOptions{CONFIG_VOXGATE_BOARD_NAME, app->version, 8000, {}});
  RegisterBoardTools(server, board);
  static voxgate::EspFirmwareUpdate firmware(link, app->version, [](const char* m, cJSON* p) { server.Notify(m, p); });

  static std::unique_ptr<voxgate::EspProtocol> protocol =
      mqtt ? voxgate::CreateEspMqttProtocol(link.mqtt, identity)
           : voxgate::CreateEspWebSocketProtocol(link.websocket, identity);
  voxgate::ProtocolEvents events;
  events.on_mcp = [](const std::string& payload) {
    server.ParseMessage(payload);
    firmware.OnMcpHandled(payload);  // an answered initialize confirms a new image
  };
  events.on_hello = [](const std::string& session) { ESP_LOGI(kTag, "session %s", session.c_str()); };
  events.on_closed = [](const std::string& reason) { ESP_LOGW(kTag, "link closed: %s", reason.c_str()); };
  events.on_error = [](const std::string& message) { ESP_LOGW(kTag, "link: %s", message.c_str()); };
  protocol->SetEvents(events);
  server.SetSender([](const std::string& json) { protocol->SendMcp(json); });
  if (!protocol->Start()) ESP_LOGE(kTag, "no usable link config: set the OTA URL in menuconfig");

  static Button button(CONFIG_VOXGATE_BUTTON_GPIO, [] { NotifyButtonPressed(server, "boot"); });
  button.Start();

  for (;;) {
    protocol->Service();
    firmware.Poll();
    vTaskDelay(pdMS_TO_TICKS(100));
  }
}
