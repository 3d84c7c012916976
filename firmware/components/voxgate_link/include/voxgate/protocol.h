// The link between a device and its gateway. One implementation per
// transport (WebSocket, MQTT; ESP and host flavours), all sharing the logic in
// this base class: device hello, waiting for the server hello, the session
// id, and the {"session_id","type":"mcp","payload"} envelope both ways.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "voxgate/hello.h"

namespace voxgate {

// Bound on one incoming message (a WebSocket message across all its frames, or
// an MQTT publish): larger ones are dropped and reported, never buffered.
constexpr size_t kMaxIncomingMessageBytes = 32 * 1024;

struct ProtocolEvents {
  std::function<void()> on_connected;                                         // transport open, hello sent
  std::function<void(const std::string& session_id)> on_hello;                // server hello received
  std::function<void(const std::string& payload)> on_mcp;                     // JSON-RPC text from the gateway
  std::function<void(const std::string& type, const std::string& frame)> on_frame;  // other types (goodbye, ...)
  std::function<void(const std::string& reason)> on_closed;                   // link down; it will reconnect
  std::function<void(const std::string& message)> on_error;                   // something worth a log line
};

class Protocol {
 public:
  explicit Protocol(Transport transport) : transport_(transport) {}
  virtual ~Protocol() = default;
  Protocol(const Protocol&) = delete;
  Protocol& operator=(const Protocol&) = delete;

  void SetEvents(ProtocolEvents events) { events_ = std::move(events); }  // before Start

  // Where incoming frames are parsed and handled (the events above called).
  // Unset: on the transport's own thread, i.e. the network library's task. The
  // device passes a worker task, so envelope parsing and MCP work (a tools/list
  // page) never run on a library task sized for the library alone. The job
  // must not outlive this link (destroy the worker first). False from the
  // dispatcher (queue full): the frame is dropped and reported.
  using Dispatcher = std::function<bool(std::function<void()> job)>;
  void SetDispatcher(Dispatcher dispatcher) { dispatcher_ = std::move(dispatcher); }  // before Start
  // How long to wait for the server hello (default kServerHelloTimeoutMs).
  void SetHelloTimeoutMs(uint32_t ms) { hello_timeout_ms_ = ms; }  // before Start
  // How long a close for a missing hello may take (default kCloseTimeoutMs).
  void SetCloseTimeoutMs(uint32_t ms) { close_timeout_ms_ = ms; }  // before Start

  // Connects, and keeps reconnecting with backoff until Stop.
  virtual bool Start() = 0;
  // Closes the link and waits until the implementation no longer calls back.
  virtual void Stop() = 0;

  // Sends one JSON-RPC message to the gateway. Thread-safe; false when down.
  bool SendMcp(const std::string& payload);

  Transport transport() const { return transport_; }
  bool connected() const;
  std::string session_id() const;

 protected:
  // For implementations, from their network thread:
  void HandleOpen(uint64_t now_ms);                 // sends the device hello
  void HandleText(const char* data, size_t length);  // one complete text message (dispatched)
  void HandleClosed(const std::string& reason);
  void ReportError(const std::string& message);
  // True once, when the server hello is overdue; WebSocket links then close.
  bool HelloOverdue(uint64_t now_ms);
  // After HelloOverdue: true when the connection still stands a close timeout
  // later, and again after each further one, until the link closes. A gateway
  // that keeps TCP open but answers neither the hello nor the close frame
  // would otherwise hold the link "connected" without a session for as long
  // as TCP lives (esp_websocket_client stops pinging once it has sent a close
  // frame). WebSocket links then drop the connection without the handshake.
  bool CloseOverdue(uint64_t now_ms);

  // Queues or writes one text frame; thread-safe.
  virtual bool SendText(const std::string& text) = 0;
  // The server said hello: the link works, so reconnect delays can start over.
  virtual void OnHelloReceived() {}

 private:
  void ProcessText(const char* data, size_t length);

  const Transport transport_;
  ProtocolEvents events_;
  Dispatcher dispatcher_;
  uint32_t hello_timeout_ms_ = kServerHelloTimeoutMs;
  uint32_t close_timeout_ms_ = kCloseTimeoutMs;
  mutable std::mutex mutex_;
  uint64_t connection_ = 0;  // counts opens: a dispatched frame of an older connection is dropped
  std::string session_id_;
  uint64_t hello_deadline_ms_ = 0;  // 0: not waiting
  uint64_t close_deadline_ms_ = 0;  // 0: no close for a missing hello under way
  bool connected_ = false;
};

// Milliseconds on a monotonic clock (for deadlines and backoff).
uint64_t MonotonicMs();

}  // namespace voxgate
