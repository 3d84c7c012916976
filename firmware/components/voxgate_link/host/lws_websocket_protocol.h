// Host only: the WebSocket link on libwebsockets. It follows the device's
// esp_websocket_client state machine (voxgate/ws_reconnect.h): after a failed
// connect or a lost connection it waits and reconnects; after a clean close
// (the server's close frame, or its own close when the server hello is overdue)
// it reconnects only under close-reconnect, and otherwise stops for good, as
// the device would. Its own close waits for the server as the device's does
// (unbounded, no pings) until Protocol::CloseOverdue drops the connection.
// Incoming frames are reassembled by the same unit as on the device
// (voxgate/ws_message.h), fed the way esp_websocket_client feeds it.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "lws_loop.h"
#include "voxgate/device_identity.h"
#include "voxgate/protocol.h"
#include "voxgate/retry_timer.h"
#include "voxgate/ws_message.h"
#include "voxgate/ws_reconnect.h"

namespace voxgate {

struct WebSocketOptions {
  std::string url;  // ws://host:port/path or wss://...
  std::string token;
  DeviceIdentity identity;
  uint32_t backoff_initial_ms = 500;
  uint32_t backoff_max_ms = 30000;
  uint32_t seed = 1;  // jitter seed: distinct per device
  // When to reconnect after a connection ends: the device's esp_websocket_client rule by default.
  WsReconnectPolicy reconnect = kDeviceWsReconnect;
  uint32_t hello_timeout_ms = kServerHelloTimeoutMs;
  size_t max_message_bytes = kMaxIncomingMessageBytes;
};

class LwsWebSocketProtocol : public Protocol, private LwsClient {
 public:
  LwsWebSocketProtocol(std::shared_ptr<LwsLoop> loop, WebSocketOptions options);
  ~LwsWebSocketProtocol() override;

  bool Start() override;
  void Stop() override;

  // True once the link has stopped for good after a connection ended (the
  // reconnect rule said so), as an esp_websocket_client task would end.
  bool stranded() const;

 private:
  bool SendText(const std::string& text) override;
  int OnLwsEvent(lws* wsi, int reason, void* in, size_t len) override;
  void OnTick(uint64_t now_ms) override;
  void OnWake() override;
  void OnHelloReceived() override;

  void Connect();
  void Ended(WsEnd end, const std::string& reason);
  // As esp_websocket_client_close with close-reconnect: sends a close frame and
  // waits, with no bound and no pings, until the server ends the connection.
  void RequestClose();
  // As esp_websocket_client_stop: ends the connection without the handshake.
  void DropConnection();
  void Receive(lws* wsi, const void* in, size_t len);

  std::shared_ptr<LwsLoop> loop_;
  WebSocketOptions options_;
  Headers headers_;
  std::string host_, host_header_, path_;
  int port_ = 80;
  bool tls_ = false;
  bool url_ok_ = false;

  // Service thread state.
  lws* wsi_ = nullptr;
  WsMessageAssembler inbox_;
  size_t frame_offset_ = 0;   // of the next piece within its frame
  uint8_t frame_opcode_ = 0;  // of the frame being received
  int peer_close_code_ = -1;  // the server's close frame status (0: none given), -1: no close frame
  RetryTimer reconnect_;
  bool running_ = false;
  bool close_requested_ = false;  // a close frame is due or sent: we ended this connection
  bool close_sent_ = false;
  bool drop_requested_ = false;
  bool stopping_close_ = false;  // Stop: let lws close (it bounds the wait for the server's answer)
  bool stranded_ = false;  // guarded by out_mutex_ for stranded()
  std::atomic<bool> hello_seen_{false};

  mutable std::mutex out_mutex_;
  std::deque<std::string> outbox_;
  bool attached_ = false;
};

}  // namespace voxgate
