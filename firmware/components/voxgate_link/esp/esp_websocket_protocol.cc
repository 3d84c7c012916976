// ESP only: the WebSocket link on espressif/esp_websocket_client.
#include <atomic>
#include <string>

#include "esp_log.h"
#include "esp_random.h"
#include "esp_timer.h"
#include "esp_websocket_client.h"
#include "esp_crt_bundle.h"

#include "esp_protocols.h"
#include "voxgate/backoff.h"

namespace voxgate {
namespace {

const char* const kTag = "ws_link";

class EspWebSocketProtocol : public EspProtocol {
 public:
  EspWebSocketProtocol(const WebSocketConfig& config, const DeviceIdentity& identity)
      : EspProtocol(Transport::kWebSocket), url_(config.url), backoff_(1000, 30000, esp_random()) {
    for (const auto& header : UpgradeHeaders(identity, config.token)) {
      headers_ += header.first + ": " + header.second + "\r\n";
    }
  }

  ~EspWebSocketProtocol() override { Stop(); }

  bool Start() override {
    esp_websocket_client_config_t cfg = {};
    cfg.uri = url_.c_str();
    cfg.headers = headers_.c_str();
    cfg.buffer_size = 2048;            // larger frames arrive in pieces and are joined below
    cfg.reconnect_timeout_ms = 1000;   // replaced by the backoff after each failure
    cfg.network_timeout_ms = 10000;
    cfg.crt_bundle_attach = esp_crt_bundle_attach;
    client_ = esp_websocket_client_init(&cfg);
    if (client_ == nullptr) return false;
    esp_websocket_register_events(client_, WEBSOCKET_EVENT_ANY, &EspWebSocketProtocol::OnEvent, this);
    return esp_websocket_client_start(client_) == ESP_OK;
  }

  void Stop() override {
    if (client_ == nullptr) return;
    esp_websocket_client_stop(client_);
    esp_websocket_client_destroy(client_);
    client_ = nullptr;
    HandleClosed("stopped");
  }

  void Service() override {
    if (close_pending_.exchange(false) && client_) {
      // Reconnects (after the backoff delay) for a fresh session.
      esp_websocket_client_close(client_, pdMS_TO_TICKS(2000));
    }
    if (HelloOverdue(static_cast<uint64_t>(esp_timer_get_time() / 1000))) close_pending_ = true;
  }

 private:
  bool SendText(const std::string& text) override {
    if (client_ == nullptr || !esp_websocket_client_is_connected(client_)) return false;
    return esp_websocket_client_send_text(client_, text.data(), static_cast<int>(text.size()), pdMS_TO_TICKS(5000)) >=
           0;
  }

  void OnHelloReceived() override {
    backoff_.Reset();
    esp_websocket_client_set_reconnect_timeout(client_, 1000);
  }

  static void OnEvent(void* self_ptr, esp_event_base_t, int32_t id, void* data) {
    auto* self = static_cast<EspWebSocketProtocol*>(self_ptr);
    auto* event = static_cast<esp_websocket_event_data_t*>(data);
    switch (id) {
      case WEBSOCKET_EVENT_CONNECTED:
        self->inbox_.clear();
        self->HandleOpen(static_cast<uint64_t>(esp_timer_get_time() / 1000));
        break;
      case WEBSOCKET_EVENT_DISCONNECTED:
      case WEBSOCKET_EVENT_CLOSED: {
        self->HandleClosed(id == WEBSOCKET_EVENT_CLOSED ? "closed by peer" : "disconnected");
        const uint32_t delay = self->backoff_.NextDelayMs();
        esp_websocket_client_set_reconnect_timeout(self->client_, static_cast<int>(delay));
        ESP_LOGW(kTag, "link down; reconnecting in %u ms", static_cast<unsigned>(delay));
        break;
      }
      case WEBSOCKET_EVENT_DATA:
        // Text frames (op 1) and their continuations (op 0); binary audio is not ours.
        if (event->op_code == 0x1 || (event->op_code == 0x0 && !self->inbox_.empty())) {
          if (event->payload_offset == 0) self->inbox_.clear();
          self->inbox_.append(event->data_ptr, event->data_len);
          if (event->payload_offset + event->data_len >= event->payload_len && event->fin) {
            self->HandleText(self->inbox_.data(), self->inbox_.size());
            self->inbox_.clear();
          }
        }
        break;
      case WEBSOCKET_EVENT_ERROR:
        self->ReportError("websocket error");
        break;
      default:
        break;
    }
  }

  std::string url_;
  std::string headers_;
  esp_websocket_client_handle_t client_ = nullptr;
  std::string inbox_;
  Backoff backoff_;
  std::atomic<bool> close_pending_{false};
};

}  // namespace

std::unique_ptr<EspProtocol> CreateEspWebSocketProtocol(const WebSocketConfig& config, const DeviceIdentity& identity) {
  return std::unique_ptr<EspProtocol>(new EspWebSocketProtocol(config, identity));
}

}  // namespace voxgate
