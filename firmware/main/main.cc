// app_main: NVS, Wi-Fi, OTA config (with boot recovery), the MCP server with
// the board tools, the link to the gateway (frames handled on a worker), and
// the button.
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "esp_app_desc.h"
#include "esp_idf_version.h"
#include "esp_log.h"
#include "esp_system.h"
#include "esp_timer.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "sdkconfig.h"

#include "board_tools.h"
#include "button.h"
#include "esp_board_hardware.h"
#include "esp_firmware_update.h"
#include "esp_link_boot.h"
#include "esp_protocols.h"
#include "mcp/mcp_server.h"
#include "nvs_settings.h"
#include "wifi_station.h"

namespace {

const char* const kTag = "voxgate";

// Task stacks in bytes (ESP-IDF counts bytes), from firmware/host/measure.sh
// plus room for a TLS record write; see firmware/README.md "Stacks". With
// CONFIG_VOXGATE_LOG_STACKS every task logs the headroom it never used.
constexpr uint32_t kLinkWorkerStack = 8192;  // envelope + MCP parse, tools/list pages, notifications, sends
constexpr uint32_t kToolWorkerStack = 7168;  // tool handlers and their results

uint64_t NowMs() { return static_cast<uint64_t>(esp_timer_get_time() / 1000); }

// Used when the OTA request fails and nothing is stored yet (optional).
voxgate::LinkConfig FallbackLink() {
  voxgate::LinkConfig link;
  if (CONFIG_VOXGATE_FALLBACK_WEBSOCKET_URL[0] != '\0') {
    link.has_websocket = true;
    link.websocket.url = CONFIG_VOXGATE_FALLBACK_WEBSOCKET_URL;
  }
  return link;
}

void LogStackHeadroom() {
  ESP_LOGD("vx_stack", "%s: %u bytes of stack never used", pcTaskGetName(nullptr),
           static_cast<unsigned>(uxTaskGetStackHighWaterMark(nullptr)));
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
#if defined(CONFIG_VOXGATE_LOG_STACKS)
  esp_log_level_set("vx_stack", ESP_LOG_DEBUG);  // figures for README "Stacks"
#endif
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

  // Where to connect (boot recovery: the last good config or the fallback is
  // served at once when the OTA request fails; see esp_link_boot.h). The OTA
  // check presents the stored credentials; a device waiting for enrollment
  // logs its activation code.
  voxgate::EspLinkBootOptions boot_options;
  boot_options.ota.url = CONFIG_VOXGATE_OTA_URL;
  boot_options.ota.identity = identity;
  boot_options.ota.info = info;
  boot_options.fallback = FallbackLink();
  boot_options.on_activation = [](voxgate::ActivationState state, const voxgate::OtaActivation& activation) {
    if (state == voxgate::ActivationState::kCode) {
      ESP_LOGW(kTag, "ACTIVATION CODE %s: %s", activation.code.c_str(), activation.message.c_str());
    } else {
      ESP_LOGW(kTag, "activation %s", voxgate::ActivationStateName(state));
    }
  };
  boot_options.log = [](const std::string& line) { ESP_LOGW(kTag, "%s", line.c_str()); };
  static voxgate::EspLinkBoot boot(std::move(boot_options));
  const voxgate::LinkConfig& link = boot.Resolve();
  const bool mqtt = UseMqtt(link);

  // Incoming frames are parsed and answered on this worker, never on the
  // network library's task; the button's notifications go out from it too.
  static std::unique_ptr<mcp::Worker> link_worker =
      mcp::Worker::Create(mcp::WorkerOptions{"vx_link", kLinkWorkerStack, 3, 8});
  static mcp::McpServer server(mcp::ServerOptions{CONFIG_VOXGATE_BOARD_NAME, app->version, 8000,
                                                  mcp::WorkerOptions{"mcp_tools", kToolWorkerStack, 2, 8}});
  RegisterBoardTools(server, board);
  static voxgate::EspFirmwareUpdate firmware(link, app->version, [](const char* m, cJSON* p) { server.Notify(m, p); });

  static std::unique_ptr<voxgate::EspProtocol> protocol = boot.CreateProtocol(mqtt);
  voxgate::ProtocolEvents events;
  events.on_mcp = [](const std::string& payload) {
    server.ParseMessage(payload);
    firmware.OnMcpHandled(payload);  // an answered initialize confirms a new image
  };
  events.on_hello = [](const std::string& session) { ESP_LOGI(kTag, "session %s", session.c_str()); };
  events.on_closed = [](const std::string& reason) { ESP_LOGW(kTag, "link closed: %s", reason.c_str()); };
  events.on_error = [](const std::string& message) { ESP_LOGW(kTag, "link: %s", message.c_str()); };
  protocol->SetEvents(events);
  protocol->SetDispatcher([](std::function<void()> job) { return link_worker->Post(std::move(job)); });
  server.SetSender([](const std::string& json) { protocol->SendMcp(json); });
  if (!protocol->Start()) ESP_LOGE(kTag, "no usable link config: set the OTA URL in menuconfig");

  static Button button(CONFIG_VOXGATE_BUTTON_GPIO, [] {
    if (!link_worker->Post([] { NotifyButtonPressed(server, "boot"); })) ESP_LOGW(kTag, "button press dropped: busy");
  });
  button.Start();

  uint64_t next_stack_log_ms = 0;
  for (;;) {
    // While the link is down and the OTA request has not been answered since
    // boot, keep asking: the gateway may have moved this device elsewhere.
    if (!protocol->connected() && boot.Moved()) {
      ESP_LOGW(kTag, "the OTA answer moved this device; restarting with the new link config");
      esp_restart();
    }
    if (NowMs() >= next_stack_log_ms) {
      LogStackHeadroom();
      next_stack_log_ms = NowMs() + 60000;
    }
    protocol->Service();
    firmware.Poll();
    vTaskDelay(pdMS_TO_TICKS(100));
  }
}
