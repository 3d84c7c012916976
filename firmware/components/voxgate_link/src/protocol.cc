#include "voxgate/protocol.h"

#include <chrono>
#include <memory>

#include "cJSON.h"
#include "voxgate/envelope.h"

namespace voxgate {

uint64_t MonotonicMs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

bool Protocol::SendMcp(const std::string& payload) {
  std::string session;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!connected_) return false;
    session = session_id_;  // empty before the server hello (and over MQTT without voice)
  }
  const std::string frame = WrapMcp(session, payload);
  return !frame.empty() && SendText(frame);
}

bool Protocol::connected() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return connected_;
}

std::string Protocol::session_id() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return session_id_;
}

void Protocol::HandleOpen(uint64_t now_ms) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    connected_ = true;
    session_id_.clear();  // every connection starts a fresh session
    hello_deadline_ms_ = now_ms + hello_timeout_ms_;
    close_deadline_ms_ = 0;
    ++connection_;
  }
  SendText(DeviceHello(transport_));
  if (events_.on_connected) events_.on_connected();
}

void Protocol::HandleText(const char* data, size_t length) {
  if (!dispatcher_) return ProcessText(data, length);
  uint64_t connection;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    connection = connection_;
  }
  auto text = std::make_shared<std::string>(data, length);
  const bool queued = dispatcher_([this, text, connection] {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (connection != connection_) return;  // a reconnect happened since: the frame belongs to a dead session
    }
    ProcessText(text->data(), text->size());
  });
  if (!queued) ReportError("dropped a frame: the handler queue is full");
}

void Protocol::ProcessText(const char* data, size_t length) {
  Envelope frame = Envelope::Parse(data, length);
  if (!frame.ok()) {
    ReportError(frame.error() == FrameError::kTooDeep ? "dropped a frame nested too deep" : "dropped a malformed frame");
    return;
  }
  if (frame.type() == "mcp") {
    // MCP never waits for the hello: over MQTT a gateway without voice may
    // answer hello with goodbye, and the MCP channel must keep working.
    char* payload = cJSON_PrintUnformatted(frame.payload());
    if (payload != nullptr && events_.on_mcp) events_.on_mcp(payload);
    cJSON_free(payload);
    return;
  }
  std::string session;
  if (ParseServerHello(frame.root(), &session)) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      session_id_ = session;
      hello_deadline_ms_ = 0;
    }
    OnHelloReceived();
    if (events_.on_hello) events_.on_hello(session);
    return;
  }
  if (frame.type() == "goodbye") {
    std::lock_guard<std::mutex> lock(mutex_);
    // The voice session ends; the MCP channel stays (session_id becomes empty).
    if (!frame.has_session_id() || frame.session_id() == session_id_) session_id_.clear();
    hello_deadline_ms_ = 0;  // answered, if not with a hello
  }
  if (events_.on_frame) events_.on_frame(frame.type(), std::string(data, length));
}

void Protocol::HandleClosed(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!connected_) return;
    connected_ = false;
    hello_deadline_ms_ = 0;
    close_deadline_ms_ = 0;
    session_id_.clear();
  }
  if (events_.on_closed) events_.on_closed(reason);
}

void Protocol::ReportError(const std::string& message) {
  if (events_.on_error) events_.on_error(message);
}

bool Protocol::HelloOverdue(uint64_t now_ms) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (hello_deadline_ms_ == 0 || now_ms < hello_deadline_ms_) return false;
    hello_deadline_ms_ = 0;
    close_deadline_ms_ = now_ms + close_timeout_ms_;
  }
  ReportError("no server hello within " + std::to_string(hello_timeout_ms_) + " ms");
  return true;
}

bool Protocol::CloseOverdue(uint64_t now_ms) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!connected_ || close_deadline_ms_ == 0 || now_ms < close_deadline_ms_) return false;
    close_deadline_ms_ = now_ms + close_timeout_ms_;  // fires again if dropping does not end it either
  }
  ReportError("the gateway did not finish the close within " + std::to_string(close_timeout_ms_) +
              " ms: dropping the connection");
  return true;
}

}  // namespace voxgate
