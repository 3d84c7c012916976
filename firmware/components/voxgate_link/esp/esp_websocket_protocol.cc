// ESP only: the WebSocket link on espressif/esp_websocket_client (>= 1.8.0).
//
// Reconnects: the library owns the connection's state machine, except after
// a close for a missing hello that the gateway never answers (Drop). It is
// configured with kDeviceWsReconnect (voxgate/ws_reconnect.h): auto-reconnect
// after failures AND after a clean close (enable_close_reconnect), else a
// gateway restart (close 1001) or our own close on a hello timeout would end
// the library's task and strand the device. Each end sets the library's next
// reconnect delay from our backoff (esp_websocket_client_set_reconnect_timeout).
//
// Data: one WEBSOCKET_EVENT_DATA per rx-buffer-full, with offsets relative to
// the FRAME; WsMessageAssembler joins frames into messages, bounded.
// The library's task only joins bytes: parsing and MCP run on the dispatcher
// (Protocol::SetDispatcher), a worker sized for them.
#include <atomic>
#include <string>

#include "esp_crt_bundle.h"
#include "esp_log.h"
#include "esp_random.h"
#include "esp_timer.h"
#include "esp_websocket_client.h"
#include "freertos/FreeRTOS.h"
#include "freertos/task.h"

#include "esp_protocols.h"
#include "voxgate/backoff.h"
#include "voxgate/ws_message.h"
#include "voxgate/ws_reconnect.h"

namespace voxgate {
namespace {

const char* const kTag = "ws_link";

class EspWebSocketProtocol : public EspProtocol {
 public:
  EspWebSocketProtocol(const WebSocketConfig& config, const DeviceIdentity& identity)
      : EspProtocol(Transport::kWebSocket),
        url_(config.url),
        backoff_(1000, 30000, esp_random()),
        inbox_(kMaxIncomingMessageBytes) {
    for (const auto& header : UpgradeHeaders(identity, config.token)) {
      headers_ += header.first + ": " + header.second + "\r\n";
    }
  }

  ~EspWebSocketProtocol() override { Stop(); }

  bool Start() override {
    esp_websocket_client_config_t cfg = {};
    cfg.uri = url_.c_str();
    cfg.headers = headers_.c_str();
    cfg.buffer_size = 2048;           // larger frames arrive in pieces and are joined by inbox_
    cfg.reconnect_timeout_ms = 1000;  // replaced by the backoff at each end
    cfg.network_timeout_ms = 10000;
    cfg.disable_auto_reconnect = !kDeviceWsReconnect.auto_reconnect;
    cfg.enable_close_reconnect = kDeviceWsReconnect.close_reconnect;
    cfg.crt_bundle_attach = esp_crt_bundle_attach;
    // cfg.task_stack: the library default (4 KB) is enough now that no MCP work runs there.
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
    const uint64_t now = static_cast<uint64_t>(esp_timer_get_time() / 1000);
    if (client_ && restart_at_ms_ != 0 && now >= restart_at_ms_) {
      restart_at_ms_ = 0;
      if (esp_websocket_client_start(client_) != ESP_OK) ReportError("could not restart the WebSocket client");
    }
    if (close_pending_.exchange(false) && client_) {
      // Never from the library's task (it refuses). With close-reconnect (>= 1.8.0) this
      // returns at once; the library finishes the close handshake and reconnects after the backoff.
      closing_ = true;
      esp_websocket_client_close(client_, pdMS_TO_TICKS(2000));
    }
    if (HelloOverdue(now)) close_pending_ = true;
    if (client_ && CloseOverdue(now)) Drop(now);
  }

 private:
  bool SendText(const std::string& text) override {
    if (client_ == nullptr || !esp_websocket_client_is_connected(client_)) return false;
    return esp_websocket_client_send_text(client_, text.data(), static_cast<int>(text.size()), pdMS_TO_TICKS(5000)) >=
           0;
  }

  // On the dispatcher: the link works, so the next end starts the delays over.
  void OnHelloReceived() override { hello_seen_ = true; }

  // The gateway answered neither the hello nor our close frame. Once it has
  // sent a close frame the library stops pinging and waits for the server's
  // answer as long as TCP lives, so stop its task (which closes the
  // connection) and start it again after the backoff, from Service().
  void Drop(uint64_t now) {
    closing_ = false;
    if (esp_websocket_client_stop(client_) != ESP_OK) return;  // CloseOverdue fires again
    inbox_.Reset();  // the library's task has ended: nothing else touches these now
    HandleClosed("no server hello, close unanswered: dropped");
    if (hello_seen_.exchange(false)) backoff_.Reset();
    const uint32_t delay = backoff_.NextDelayMs();
    restart_at_ms_ = now + delay;
    ESP_LOGW(kTag, "dropped a connection that answered neither hello nor close; reconnecting in %u ms",
             static_cast<unsigned>(delay));
  }

  void OnData(const esp_websocket_event_data_t& event) {
    if (event.data_len < 0 || event.payload_len < 0 || event.payload_offset < 0) return;
    WsChunk chunk;
    chunk.op_code = event.op_code;
    chunk.fin = event.fin;
    chunk.payload_len = static_cast<size_t>(event.payload_len);
    chunk.payload_offset = static_cast<size_t>(event.payload_offset);
    chunk.data = event.data_ptr;
    chunk.data_len = static_cast<size_t>(event.data_len);
    switch (inbox_.Add(chunk)) {
      case WsMessageAssembler::Result::kMessage: {
        const std::string message = std::move(inbox_.message());
        HandleText(message.data(), message.size());  // copied to the dispatcher
        ESP_LOGD("vx_stack", "%s: %u bytes of stack never used", pcTaskGetName(nullptr),
                 static_cast<unsigned>(uxTaskGetStackHighWaterMark(nullptr)));
        break;
      }
      case WsMessageAssembler::Result::kTooLarge:
        ReportError("dropped a message larger than the bound");
        break;
      case WsMessageAssembler::Result::kProtocolError:
        ReportError("dropped a message: broken fragment sequence");
        break;
      default:
        break;
    }
  }

  static void OnEvent(void* self_ptr, esp_event_base_t, int32_t id, void* data) {
    auto* self = static_cast<EspWebSocketProtocol*>(self_ptr);
    auto* event = static_cast<esp_websocket_event_data_t*>(data);
    switch (id) {
      case WEBSOCKET_EVENT_CONNECTED:
        self->inbox_.Reset();
        self->HandleOpen(static_cast<uint64_t>(esp_timer_get_time() / 1000));
        break;
      case WEBSOCKET_EVENT_DISCONNECTED:  // connect failed or connection lost (WsEnd::kConnectFailed/kConnectionLost)
      case WEBSOCKET_EVENT_CLOSED: {      // close handshake done (WsEnd::kServerClose/kClientClose)
        std::string reason = "disconnected";
        if (self->closing_.exchange(false)) {
          reason = "no server hello";  // our own close; the server's echo may carry a code too
        } else if (id == WEBSOCKET_EVENT_CLOSED) {
          // close_status_code (>= 1.8.0): the server's code, 1001 on a gateway restart.
          reason = "closed by peer (" + std::to_string(event->close_status_code) + ")";
        }
        self->inbox_.Reset();
        self->HandleClosed(reason);
        if (self->hello_seen_.exchange(false)) self->backoff_.Reset();
        const uint32_t delay = self->backoff_.NextDelayMs();
        esp_websocket_client_set_reconnect_timeout(self->client_, static_cast<int>(delay));
        ESP_LOGW(kTag, "%s; reconnecting in %u ms", reason.c_str(), static_cast<unsigned>(delay));
        break;
      }
      case WEBSOCKET_EVENT_DATA:
        self->OnData(*event);
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
  Backoff backoff_;           // the library's task, or Service() while that task is stopped
  WsMessageAssembler inbox_;  // the library's task, or Service() while that task is stopped
  uint64_t restart_at_ms_ = 0;  // Service() only: when to start the client again after Drop
  std::atomic<bool> close_pending_{false};
  std::atomic<bool> hello_seen_{false};
  std::atomic<bool> closing_{false};  // we asked for the close (hello overdue)
};

}  // namespace

std::unique_ptr<EspProtocol> CreateEspWebSocketProtocol(const WebSocketConfig& config, const DeviceIdentity& identity) {
  return std::unique_ptr<EspProtocol>(new EspWebSocketProtocol(config, identity));
}

}  // namespace voxgate
