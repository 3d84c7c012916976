#include "lws_websocket_protocol.h"

#include <libwebsockets.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "voxgate/url.h"

namespace voxgate {
namespace {

constexpr size_t kMaxFrameBytes = 256 * 1024;
constexpr size_t kMaxQueuedFrames = 64;

}  // namespace

LwsWebSocketProtocol::LwsWebSocketProtocol(std::shared_ptr<LwsLoop> loop, WebSocketOptions options)
    : Protocol(Transport::kWebSocket),
      loop_(std::move(loop)),
      options_(std::move(options)),
      headers_(UpgradeHeaders(options_.identity, options_.token)),
      backoff_(options_.backoff_initial_ms, options_.backoff_max_ms, options_.seed) {
  Url url;
  url_ok_ = ParseUrl(options_.url, &url) && (url.scheme == "ws" || url.scheme == "wss");
  tls_ = url.tls();
  host_ = url.host;
  port_ = url.port;
  host_header_ = url.host_header();
  path_ = url.path;
}

LwsWebSocketProtocol::~LwsWebSocketProtocol() { Stop(); }

bool LwsWebSocketProtocol::Start() {
  if (!url_ok_ || !loop_->ok()) return false;
  loop_->Run([this] {
    if (!attached_) loop_->Attach(this);
    attached_ = true;
    running_ = true;
    Connect();
  });
  return true;
}

void LwsWebSocketProtocol::Stop() {
  loop_->Run([this] {
    running_ = false;
    next_attempt_ms_ = 0;
    RequestClose();
  });
  // Wait until lws has let go of the connection, then detach.
  for (;;) {
    bool idle = false;
    loop_->Run([&] {
      idle = wsi_ == nullptr;
      if (idle && attached_) {
        loop_->Detach(this);
        attached_ = false;
      }
    });
    if (idle) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // shutdown only: lws closes within a few ms
  }
}

void LwsWebSocketProtocol::Connect() {
  next_attempt_ms_ = 0;
  if (wsi_ != nullptr || !running_) return;
  lws_client_connect_info info;
  memset(&info, 0, sizeof info);
  info.context = loop_->context();
  info.address = host_.c_str();
  info.port = port_;
  info.path = path_.c_str();
  info.host = host_header_.c_str();
  info.origin = host_.c_str();
  info.ssl_connection = tls_ ? LCCSCF_USE_SSL : 0;
  info.opaque_user_data = static_cast<LwsClient*>(this);
  info.pwsi = &wsi_;
  inbox_.clear();
  close_requested_ = false;
  if (lws_client_connect_via_info(&info) == nullptr) {
    wsi_ = nullptr;
    if (next_attempt_ms_ == 0) Disconnected("connect failed");
  }
}

void LwsWebSocketProtocol::Disconnected(const std::string& reason) {
  wsi_ = nullptr;
  {
    std::lock_guard<std::mutex> lock(out_mutex_);
    outbox_.clear();  // frames for a dead connection mean nothing to the next one
  }
  if (connected()) {
    HandleClosed(reason);
  } else {
    ReportError(reason);
  }
  if (running_) next_attempt_ms_ = MonotonicMs() + backoff_.NextDelayMs();
}

void LwsWebSocketProtocol::OnHelloReceived() { backoff_.Reset(); }

void LwsWebSocketProtocol::RequestClose() {
  if (wsi_ == nullptr) return;
  close_requested_ = true;
  lws_callback_on_writable(wsi_);
}

bool LwsWebSocketProtocol::SendText(const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(out_mutex_);
    if (outbox_.size() >= kMaxQueuedFrames) return false;
    outbox_.push_back(text);
  }
  loop_->Wake();
  return true;
}

void LwsWebSocketProtocol::OnWake() {
  if (wsi_ == nullptr) return;
  std::lock_guard<std::mutex> lock(out_mutex_);
  if (!outbox_.empty()) lws_callback_on_writable(wsi_);
}

void LwsWebSocketProtocol::OnTick(uint64_t now_ms) {
  if (next_attempt_ms_ != 0 && now_ms >= next_attempt_ms_) Connect();
  if (wsi_ != nullptr && HelloOverdue(now_ms)) RequestClose();  // reconnect for a fresh session
}

int LwsWebSocketProtocol::OnLwsEvent(lws* wsi, int reason, void* in, size_t len) {
  switch (reason) {
    case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
      auto** p = static_cast<unsigned char**>(in);
      unsigned char* end = *p + len;
      for (const auto& header : headers_) {
        const std::string name = header.first + ":";
        if (lws_add_http_header_by_name(wsi, reinterpret_cast<const unsigned char*>(name.c_str()),
                                        reinterpret_cast<const unsigned char*>(header.second.data()),
                                        static_cast<int>(header.second.size()), p, end)) {
          return -1;
        }
      }
      return 0;
    }
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
      wsi_ = wsi;
      {
        std::lock_guard<std::mutex> lock(out_mutex_);
        outbox_.clear();  // a connection always starts with the device hello
      }
      HandleOpen(MonotonicMs());
      return 0;
    case LWS_CALLBACK_CLIENT_RECEIVE:
      if (lws_frame_is_binary(wsi)) return 0;  // audio is not ours to handle
      if (inbox_.size() + len > kMaxFrameBytes) {
        ReportError("frame too large; closing");
        return -1;
      }
      inbox_.append(static_cast<const char*>(in), len);
      if (lws_is_final_fragment(wsi) && lws_remaining_packet_payload(wsi) == 0) {
        const std::string frame = std::move(inbox_);
        inbox_.clear();
        HandleText(frame.data(), frame.size());
      }
      return 0;
    case LWS_CALLBACK_CLIENT_WRITEABLE: {
      if (close_requested_) {
        lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, nullptr, 0);
        return -1;
      }
      std::string frame;
      bool more = false;
      {
        std::lock_guard<std::mutex> lock(out_mutex_);
        if (outbox_.empty()) return 0;
        frame = std::move(outbox_.front());
        outbox_.pop_front();
        more = !outbox_.empty();
      }
      std::vector<unsigned char> buffer(LWS_PRE + frame.size());
      memcpy(buffer.data() + LWS_PRE, frame.data(), frame.size());
      if (lws_write(wsi, buffer.data() + LWS_PRE, frame.size(), LWS_WRITE_TEXT) < static_cast<int>(frame.size())) {
        return -1;
      }
      if (more) lws_callback_on_writable(wsi);
      return 0;
    }
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
      lws_set_opaque_user_data(wsi, nullptr);
      Disconnected(in ? std::string("connect failed: ") + static_cast<const char*>(in) : "connect failed");
      return 0;
    case LWS_CALLBACK_CLIENT_CLOSED:
      lws_set_opaque_user_data(wsi, nullptr);
      Disconnected(close_requested_ && !running_ ? "stopped" : close_requested_ ? "no server hello" : "closed by peer");
      return 0;
    default:
      return 0;
  }
}

}  // namespace voxgate
