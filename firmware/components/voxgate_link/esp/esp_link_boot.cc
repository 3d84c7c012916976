// ESP only: see esp_link_boot.h.
#include "esp_link_boot.h"

#include <utility>

#include "esp_random.h"
#include "esp_timer.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"

namespace voxgate {
namespace {

uint64_t NowMs() { return static_cast<uint64_t>(esp_timer_get_time() / 1000); }

void Delay(uint32_t ms) { vTaskDelay(pdMS_TO_TICKS(ms)); }

}  // namespace

EspLinkBoot::EspLinkBoot(EspLinkBootOptions options)
    : options_(std::move(options)),
      store_(CreateNvsConfigStore()),
      ota_(options_.ota, NowMs,
           [](uint32_t ms) {
             Delay(ms);
             return true;
           }),
      resolver_([this](const LinkConfig& stored, LinkConfig* answer,
                       std::string* error) { return ota_.Fetch(stored, answer, error); },
                *store_, Backoff(2000, 120000, esp_random()), options_.fallback) {
  ota_.SetActivationHandler(options_.on_activation);
  resolver_.SetLog(options_.log);
}

const LinkConfig& EspLinkBoot::Resolve() {
  link_ = resolver_.Resolve(NowMs, Delay);
  return link_;
}

std::unique_ptr<EspProtocol> EspLinkBoot::CreateProtocol(bool mqtt) {
  const DeviceIdentity& identity = options_.ota.identity;
  if (!mqtt) return CreateEspWebSocketProtocol(link_.websocket, identity);
  if (link_.mqtt.client_id.empty()) link_.mqtt.client_id = MqttClientId("voxgate", identity);
  return CreateEspMqttProtocol(link_.mqtt, identity);
}

bool EspLinkBoot::Moved() {
  LinkConfig fresh;
  return resolver_.Poll(NowMs(), &fresh);
}

}  // namespace voxgate
