// Host only: the WebSocket link on libwebsockets.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "lws_loop.h"
#include "voxgate/backoff.h"
#include "voxgate/device_identity.h"
#include "voxgate/protocol.h"

namespace voxgate {

struct WebSocketOptions {
  std::string url;  // ws://host:port/path or wss://...
  std::string token;
  DeviceIdentity identity;
  uint32_t backoff_initial_ms = 500;
  uint32_t backoff_max_ms = 30000;
  uint32_t seed = 1;  // jitter seed: distinct per device
};

class LwsWebSocketProtocol : public Protocol, private LwsClient {
 public:
  LwsWebSocketProtocol(std::shared_ptr<LwsLoop> loop, WebSocketOptions options);
  ~LwsWebSocketProtocol() override;

  bool Start() override;
  void Stop() override;

 private:
  bool SendText(const std::string& text) override;
  int OnLwsEvent(lws* wsi, int reason, void* in, size_t len) override;
  void OnTick(uint64_t now_ms) override;
  void OnWake() override;
  void OnHelloReceived() override;

  void Connect();
  void Disconnected(const std::string& reason);
  void RequestClose();

  std::shared_ptr<LwsLoop> loop_;
  WebSocketOptions options_;
  Headers headers_;
  std::string host_, host_header_, path_;
  int port_ = 80;
  bool tls_ = false;
  bool url_ok_ = false;

  // Service thread state.
  lws* wsi_ = nullptr;
  std::string inbox_;
  uint64_t next_attempt_ms_ = 0;  // 0: no reconnect scheduled
  bool running_ = false;
  bool close_requested_ = false;
  Backoff backoff_;

  std::mutex out_mutex_;
  std::deque<std::string> outbox_;
  bool attached_ = false;
};

}  // namespace voxgate
