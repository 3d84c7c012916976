// Test helper: a minimal WebSocket "gateway" on libwebsockets, listening on
// 127.0.0.1 with a kernel-chosen port, serviced by its own thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

struct lws;
struct lws_context;

class TestGateway {
 public:
  TestGateway();
  ~TestGateway();

  int port() const { return port_; }
  std::string url() const { return "ws://127.0.0.1:" + std::to_string(port_) + "/xiaozhi/v1/"; }

  // Next text frame from the device, or "" if none within the timeout (a
  // bound on a hung test, not a timing assertion).
  std::string NextFrame(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  void Send(const std::string& text);
  // One text message sent as several frames: TEXT (no FIN), CONTINUATION..., CONTINUATION+FIN.
  void SendFragmented(const std::vector<std::string>& parts);
  // A clean close started by the gateway: a close frame with `code` (1001: going away, as on a restart).
  void CloseConnection(int code);
  void DropConnection();
  // Upgrade header of the latest connection ("authorization", "device-id", ...).
  std::string Header(const std::string& name);
  int connections();

  // lws callback entry (service thread).
  int OnEvent(lws* wsi, int reason, void* in, size_t len);

 private:
  lws_context* context_ = nullptr;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::string> inbox_;
  enum class Piece : unsigned char { kWhole, kFirst, kMiddle, kLast };
  std::deque<std::pair<std::string, Piece>> outbox_;
  int close_code_ = 0;  // > 0: close with it at the next writeable
  std::map<std::string, std::string> headers_;
  std::string partial_;
  lws* wsi_ = nullptr;
  bool drop_ = false;
  bool stopping_ = false;
  int connections_ = 0;
};
