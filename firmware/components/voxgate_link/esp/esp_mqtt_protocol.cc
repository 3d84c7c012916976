// ESP only: the MQTT link on ESP-IDF's mqtt component (esp-mqtt).
//
// Reconnects are ours, not the client's: esp_mqtt_set_config() rebuilds the
// whole configuration from the struct it is given (an update holding only
// reconnect_timeout_ms wipes crt_bundle_attach and resets the buffer to its
// default), so the delay cannot be changed between attempts without breaking
// TLS. The client runs with disable_auto_reconnect: after a drop it waits in
// MQTT_STATE_WAIT_RECONNECT until esp_mqtt_client_reconnect(), which Service()
// calls when our backoff (RetryTimer) is due. The config given to
// esp_mqtt_client_init() is never touched again.
#include <mutex>
#include <string>

#include "esp_crt_bundle.h"
#include "esp_log.h"
#include "esp_random.h"
#include "esp_timer.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"
#include "mqtt_client.h"

#include "esp_protocols.h"
#include "voxgate/retry_timer.h"

namespace voxgate {
namespace {

const char* const kTag = "mqtt_link";

uint64_t NowMs() { return static_cast<uint64_t>(esp_timer_get_time() / 1000); }

class EspMqttProtocol : public EspProtocol {
 public:
  EspMqttProtocol(const MqttConfig& config, const DeviceIdentity& identity)
      : EspProtocol(Transport::kMqtt),
        config_(config),
        subscribe_topic_(P2pTopic(identity.mac)),
        reconnect_(Backoff(1000, 30000, esp_random())) {}

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
    cfg.network.disable_auto_reconnect = true;  // Service() reconnects when the backoff is due
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
    {
      std::lock_guard<std::mutex> lock(mutex_);
      reconnect_.Cancel();
    }
    HandleClosed("stopped");
  }

  // Over MQTT a missing hello is only reported: MCP needs no voice session.
  void Service() override {
    const uint64_t now = NowMs();
    HelloOverdue(now);
    bool due;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      due = reconnect_.Due(now);
    }
    // ESP_FAIL means the client is not in MQTT_STATE_WAIT_RECONNECT (already connecting): its next
    // MQTT_EVENT_DISCONNECTED arms the timer again.
    if (due && client_ != nullptr && esp_mqtt_client_reconnect(client_) != ESP_OK) {
      ESP_LOGD(kTag, "reconnect not needed: the client is not waiting");
    }
  }

 private:
  bool SendText(const std::string& text) override {
    if (client_ == nullptr) return false;
    return esp_mqtt_client_publish(client_, config_.publish_topic.c_str(), text.data(), static_cast<int>(text.size()),
                                   0, 0) >= 0;
  }

  void OnData(const esp_mqtt_event_t& event) {
    // A message larger than the buffer arrives in several DATA events; bound it before buffering.
    if (event.total_data_len < 0 || static_cast<size_t>(event.total_data_len) > kMaxIncomingMessageBytes) {
      if (event.current_data_offset == 0) ReportError("dropped a message larger than the bound");
      return;
    }
    if (event.current_data_offset == 0) inbox_.clear();
    if (inbox_.size() != static_cast<size_t>(event.current_data_offset)) return;  // a piece went missing
    inbox_.append(event.data, static_cast<size_t>(event.data_len));
    if (inbox_.size() >= static_cast<size_t>(event.total_data_len)) {
      HandleText(inbox_.data(), inbox_.size());  // copied to the dispatcher
      inbox_.clear();
      ESP_LOGD("vx_stack", "%s: %u bytes of stack never used", pcTaskGetName(nullptr),
               static_cast<unsigned>(uxTaskGetStackHighWaterMark(nullptr)));
    }
  }

  static void OnEvent(void* self_ptr, esp_event_base_t, int32_t id, void* data) {
    auto* self = static_cast<EspMqttProtocol*>(self_ptr);
    auto* event = static_cast<esp_mqtt_event_handle_t>(data);
    switch (static_cast<esp_mqtt_event_id_t>(id)) {
      case MQTT_EVENT_CONNECTED: {
        {
          std::lock_guard<std::mutex> lock(self->mutex_);
          self->reconnect_.Succeeded();
        }
        // Subscribing to our own p2p topic lets a stock broker deliver; pushes
        // on any other topic are handled all the same (see MQTT_EVENT_DATA).
        esp_mqtt_client_subscribe(self->client_, self->subscribe_topic_.c_str(), 0);
        self->HandleOpen(NowMs());
        break;
      }
      case MQTT_EVENT_DISCONNECTED: {  // after a drop and after each failed connect
        self->inbox_.clear();
        self->HandleClosed("disconnected");
        uint32_t delay;
        {
          std::lock_guard<std::mutex> lock(self->mutex_);
          delay = self->reconnect_.Failed(NowMs());
        }
        ESP_LOGW(kTag, "link down; reconnecting in %u ms", static_cast<unsigned>(delay));
        break;
      }
      case MQTT_EVENT_DATA:
        self->OnData(*event);
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
  std::string inbox_;  // the client's task only
  std::mutex mutex_;   // reconnect_: the client's task (events) and the main task (Service)
  RetryTimer reconnect_;
};

}  // namespace

std::unique_ptr<EspProtocol> CreateEspMqttProtocol(const MqttConfig& config, const DeviceIdentity& identity) {
  return std::unique_ptr<EspProtocol>(new EspMqttProtocol(config, identity));
}

}  // namespace voxgate
