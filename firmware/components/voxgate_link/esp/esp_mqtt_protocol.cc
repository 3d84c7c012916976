// ESP only: the MQTT link on ESP-IDF's mqtt component (esp-mqtt).
#include <string>

#include "esp_crt_bundle.h"
#include "esp_log.h"
#include "esp_random.h"
#include "esp_timer.h"
#include "mqtt_client.h"

#include "esp_protocols.h"
#include "voxgate/backoff.h"

namespace voxgate {
namespace {

const char* const kTag = "mqtt_link";

class EspMqttProtocol : public EspProtocol {
 public:
  EspMqttProtocol(const MqttConfig& config, const DeviceIdentity& identity)
      : EspProtocol(Transport::kMqtt),
        config_(config),
        subscribe_topic_(P2pTopic(identity.mac)),
        backoff_(1000, 30000, esp_random()) {}

  ~EspMqttProtocol() override { Stop(); }

  bool Start() override {
    if (!SplitEndpoint(config_.endpoint, 8883, &host_, &port_)) return false;
    esp_mqtt_client_config_t cfg = {};
    cfg.broker.address.hostname = host_.c_str();
    cfg.broker.address.port = port_;
    cfg.broker.address.transport = port_ == 8883 ? MQTT_TRANSPORT_OVER_SSL : MQTT_TRANSPORT_OVER_TCP;
    if (port_ == 8883) cfg.broker.verification.crt_bundle_attach = esp_crt_bundle_attach;
    cfg.credentials.client_id = config_.client_id.c_str();
    cfg.credentials.username = config_.username.empty() ? nullptr : config_.username.c_str();
    cfg.credentials.authentication.password = config_.password.empty() ? nullptr : config_.password.c_str();
    cfg.session.keepalive = config_.keepalive_s;
    cfg.session.protocol_ver = MQTT_PROTOCOL_V_3_1_1;
    cfg.network.reconnect_timeout_ms = 1000;  // replaced by the backoff after each failure
    cfg.buffer.size = 4096;
    client_ = esp_mqtt_client_init(&cfg);
    if (client_ == nullptr) return false;
    esp_mqtt_client_register_event(client_, MQTT_EVENT_ANY, &EspMqttProtocol::OnEvent, this);
    return esp_mqtt_client_start(client_) == ESP_OK;
  }

  void Stop() override {
    if (client_ == nullptr) return;
    esp_mqtt_client_stop(client_);
    esp_mqtt_client_destroy(client_);
    client_ = nullptr;
    HandleClosed("stopped");
  }

  // Over MQTT a missing hello is only reported: MCP needs no voice session.
  void Service() override { HelloOverdue(static_cast<uint64_t>(esp_timer_get_time() / 1000)); }

 private:
  bool SendText(const std::string& text) override {
    if (client_ == nullptr) return false;
    return esp_mqtt_client_publish(client_, config_.publish_topic.c_str(), text.data(), static_cast<int>(text.size()),
                                   0, 0) >= 0;
  }

  void SetReconnectDelay(uint32_t delay_ms) {
    esp_mqtt_client_config_t update = {};
    update.network.reconnect_timeout_ms = static_cast<int>(delay_ms);
    esp_mqtt_set_config(client_, &update);
  }

  static void OnEvent(void* self_ptr, esp_event_base_t, int32_t id, void* data) {
    auto* self = static_cast<EspMqttProtocol*>(self_ptr);
    auto* event = static_cast<esp_mqtt_event_handle_t>(data);
    switch (static_cast<esp_mqtt_event_id_t>(id)) {
      case MQTT_EVENT_CONNECTED:
        self->backoff_.Reset();
        self->SetReconnectDelay(1000);
        // Subscribing to our own p2p topic lets a stock broker deliver; pushes
        // on any other topic are handled all the same (see MQTT_EVENT_DATA).
        esp_mqtt_client_subscribe(self->client_, self->subscribe_topic_.c_str(), 0);
        self->HandleOpen(static_cast<uint64_t>(esp_timer_get_time() / 1000));
        break;
      case MQTT_EVENT_DISCONNECTED: {
        self->HandleClosed("disconnected");
        const uint32_t delay = self->backoff_.NextDelayMs();
        self->SetReconnectDelay(delay);
        ESP_LOGW(kTag, "link down; reconnecting in %u ms", static_cast<unsigned>(delay));
        break;
      }
      case MQTT_EVENT_DATA:
        // A message larger than the buffer arrives in several DATA events.
        if (event->current_data_offset == 0) self->inbox_.clear();
        self->inbox_.append(event->data, event->data_len);
        if (event->current_data_offset + event->data_len >= event->total_data_len) {
          self->HandleText(self->inbox_.data(), self->inbox_.size());
          self->inbox_.clear();
        }
        break;
      case MQTT_EVENT_ERROR:
        self->ReportError("mqtt error");
        break;
      default:
        break;
    }
  }

  MqttConfig config_;
  std::string subscribe_topic_;
  std::string host_;
  uint16_t port_ = 8883;
  esp_mqtt_client_handle_t client_ = nullptr;
  std::string inbox_;
  Backoff backoff_;
};

}  // namespace

std::unique_ptr<EspProtocol> CreateEspMqttProtocol(const MqttConfig& config, const DeviceIdentity& identity) {
  return std::unique_ptr<EspProtocol>(new EspMqttProtocol(config, identity));
}

}  // namespace voxgate
