#include "wifi_station.h"

#include <cstdio>
#include <cstring>

#include "esp_event.h"
#include "esp_log.h"
#include "esp_mac.h"
#include "esp_netif.h"
#include "esp_random.h"
#include "esp_timer.h"
#include "esp_wifi.h"
#include "freertos/FreeRTOS.h"
#include "freertos/event_groups.h"

#include "voxgate/backoff.h"

namespace {

const char* const kTag = "wifi";
constexpr EventBits_t kConnectedBit = BIT0;

EventGroupHandle_t g_events = nullptr;
esp_timer_handle_t g_retry_timer = nullptr;
voxgate::Backoff* g_backoff = nullptr;

void Retry(void*) { esp_wifi_connect(); }

void OnEvent(void*, esp_event_base_t base, int32_t id, void*) {
  if (base == WIFI_EVENT && id == WIFI_EVENT_STA_START) {
    esp_wifi_connect();
  } else if (base == WIFI_EVENT && id == WIFI_EVENT_STA_DISCONNECTED) {
    xEventGroupClearBits(g_events, kConnectedBit);
    const uint32_t delay = g_backoff->NextDelayMs();
    ESP_LOGW(kTag, "disconnected; retrying in %u ms", static_cast<unsigned>(delay));
    esp_timer_stop(g_retry_timer);
    esp_timer_start_once(g_retry_timer, static_cast<uint64_t>(delay) * 1000);
  } else if (base == IP_EVENT && id == IP_EVENT_STA_GOT_IP) {
    g_backoff->Reset();
    xEventGroupSetBits(g_events, kConnectedBit);
  }
}

}  // namespace

bool WifiStation::Start(const std::string& ssid, const std::string& password) {
  g_events = xEventGroupCreate();
  static voxgate::Backoff backoff(500, 30000, esp_random());
  g_backoff = &backoff;
  esp_timer_create_args_t timer_args = {};
  timer_args.callback = &Retry;
  timer_args.name = "wifi_retry";
  ESP_ERROR_CHECK(esp_timer_create(&timer_args, &g_retry_timer));

  ESP_ERROR_CHECK(esp_netif_init());
  ESP_ERROR_CHECK(esp_event_loop_create_default());
  esp_netif_create_default_wifi_sta();
  wifi_init_config_t init = WIFI_INIT_CONFIG_DEFAULT();
  ESP_ERROR_CHECK(esp_wifi_init(&init));
  ESP_ERROR_CHECK(esp_event_handler_register(WIFI_EVENT, ESP_EVENT_ANY_ID, &OnEvent, nullptr));
  ESP_ERROR_CHECK(esp_event_handler_register(IP_EVENT, IP_EVENT_STA_GOT_IP, &OnEvent, nullptr));

  wifi_config_t config = {};
  strncpy(reinterpret_cast<char*>(config.sta.ssid), ssid.c_str(), sizeof config.sta.ssid - 1);
  strncpy(reinterpret_cast<char*>(config.sta.password), password.c_str(), sizeof config.sta.password - 1);
  config.sta.threshold.authmode = password.empty() ? WIFI_AUTH_OPEN : WIFI_AUTH_WPA2_PSK;
  ESP_ERROR_CHECK(esp_wifi_set_mode(WIFI_MODE_STA));
  ESP_ERROR_CHECK(esp_wifi_set_config(WIFI_IF_STA, &config));
  return esp_wifi_start() == ESP_OK;
}

bool WifiStation::WaitConnected(uint32_t timeout_ms) {
  const EventBits_t bits = xEventGroupWaitBits(g_events, kConnectedBit, pdFALSE, pdTRUE, pdMS_TO_TICKS(timeout_ms));
  return (bits & kConnectedBit) != 0;
}

std::string WifiStation::MacAddress() {
  uint8_t mac[6] = {};
  esp_read_mac(mac, ESP_MAC_WIFI_STA);
  char text[18];
  snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
  return text;
}
