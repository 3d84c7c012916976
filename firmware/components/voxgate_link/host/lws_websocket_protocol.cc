#include "lws_websocket_protocol.h"

#include <libwebsockets.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "voxgate/url.h"

namespace voxgate {
namespace {

constexpr size_t kMaxQueuedFrames = 64;

const char* EndName(WsEnd end) {
  switch (end) {
    case WsEnd::kConnectFailed:
      return "connect failed";
    case WsEnd::kConnectionLost:
      return "connection lost";
    case WsEnd::kServerClose:
      return "closed by peer";
    case WsEnd::kClientClose:
      return "no server hello";
  }
  return "closed";
}

}  // namespace

LwsWebSocketProtocol::LwsWebSocketProtocol(std::shared_ptr<LwsLoop> loop, WebSocketOptions options)
    : Protocol(Transport::kWebSocket),
      loop_(std::move(loop)),
      options_(std::move(options)),
      headers_(UpgradeHeaders(options_.identity, options_.token)),
      inbox_(options_.max_message_bytes),
      reconnect_(Backoff(options_.backoff_initial_ms, options_.backoff_max_ms, options_.seed)) {
  Url url;
  url_ok_ = ParseUrl(options_.url, &url) && (url.scheme == "ws" || url.scheme == "wss");
  tls_ = url.tls();
  host_ = url.host;
  port_ = url.port;
  host_header_ = url.host_header();
  path_ = url.path;
  SetHelloTimeoutMs(options_.hello_timeout_ms);
}

LwsWebSocketProtocol::~LwsWebSocketProtocol() { Stop(); }

bool LwsWebSocketProtocol::Start() {
  if (!url_ok_ || !loop_->ok()) return false;
  loop_->Run([this] {
    if (!attached_) loop_->Attach(this);
    attached_ = true;
    running_ = true;
    {
      std::lock_guard<std::mutex> lock(out_mutex_);
      stranded_ = false;
    }
    Connect();
  });
  return true;
}

void LwsWebSocketProtocol::Stop() {
  loop_->Run([this] {
    running_ = false;
    reconnect_.Cancel();
    if (close_sent_) {
      DropConnection();  // the server did not answer our close: do not wait for it
    } else if (wsi_ != nullptr) {
      stopping_close_ = true;
      RequestClose();
    }
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

bool LwsWebSocketProtocol::stranded() const {
  std::lock_guard<std::mutex> lock(out_mutex_);
  return stranded_;
}

void LwsWebSocketProtocol::Connect() {
  reconnect_.Cancel();
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
  inbox_.Reset();
  frame_offset_ = 0;
  peer_close_code_ = -1;
  close_requested_ = false;
  close_sent_ = false;
  drop_requested_ = false;
  stopping_close_ = false;
  if (lws_client_connect_via_info(&info) == nullptr) {
    wsi_ = nullptr;
    if (!reconnect_.armed()) Ended(WsEnd::kConnectFailed, "connect failed");
  }
}

void LwsWebSocketProtocol::Ended(WsEnd end, const std::string& reason) {
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
  if (!running_) return;
  if (hello_seen_.exchange(false)) reconnect_.Succeeded();  // the link worked: delays start over
  if (ReconnectsAfter(end, options_.reconnect)) {
    reconnect_.Failed(MonotonicMs());
    return;
  }
  // What esp_websocket_client does here without close-reconnect: its task ends.
  running_ = false;
  {
    std::lock_guard<std::mutex> lock(out_mutex_);
    stranded_ = true;
  }
  ReportError(std::string("link stopped for good after: ") + EndName(end));
}

// Maybe on a dispatcher thread: only flag it; the service thread resets the backoff.
void LwsWebSocketProtocol::OnHelloReceived() { hello_seen_ = true; }

void LwsWebSocketProtocol::RequestClose() {
  if (wsi_ == nullptr || close_requested_) return;
  close_requested_ = true;
  lws_callback_on_writable(wsi_);
}

void LwsWebSocketProtocol::DropConnection() {
  if (wsi_ == nullptr) return;
  close_requested_ = true;
  drop_requested_ = true;
  // lws sees the socket end and reports LWS_CALLBACK_CLIENT_CLOSED, with no close handshake.
  shutdown(lws_get_socket_fd(wsi_), SHUT_RDWR);
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
  if (reconnect_.Due(now_ms)) Connect();
  if (wsi_ != nullptr && HelloOverdue(now_ms)) RequestClose();  // reconnect for a fresh session
  if (wsi_ != nullptr && CloseOverdue(now_ms)) DropConnection();
}

// Describes each piece lws delivers the way esp_websocket_client does (offset
// within the frame, the frame's length and opcode) and feeds the shared unit.
void LwsWebSocketProtocol::Receive(lws* wsi, const void* in, size_t len) {
  const size_t remaining = lws_remaining_packet_payload(wsi);
  if (frame_offset_ == 0) {
    frame_opcode_ = !lws_is_first_fragment(wsi) ? kWsContinuation : lws_frame_is_binary(wsi) ? kWsBinary : kWsText;
  }
  WsChunk chunk;
  chunk.op_code = frame_opcode_;
  chunk.fin = lws_is_final_fragment(wsi) != 0;  // lws reports FIN on the frame's last piece only
  chunk.payload_offset = frame_offset_;
  chunk.payload_len = frame_offset_ + len + remaining;
  chunk.data = static_cast<const char*>(in);
  chunk.data_len = len;
  frame_offset_ = remaining == 0 ? 0 : frame_offset_ + len;
  switch (inbox_.Add(chunk)) {
    case WsMessageAssembler::Result::kMessage: {
      const std::string message = std::move(inbox_.message());
      HandleText(message.data(), message.size());
      break;
    }
    case WsMessageAssembler::Result::kTooLarge:
      ReportError("dropped a message larger than " + std::to_string(options_.max_message_bytes) + " bytes");
      break;
    case WsMessageAssembler::Result::kProtocolError:
      ReportError("dropped a message: broken fragment sequence");
      break;
    default:
      break;
  }
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
      Receive(wsi, in, len);
      return 0;
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE: {
      // A clean close by the server; lws answers it. The status code, if any, leads the payload.
      const auto* body = static_cast<const unsigned char*>(in);
      peer_close_code_ = len >= 2 ? (body[0] << 8) | body[1] : 0;
      return 0;
    }
    case LWS_CALLBACK_CLIENT_WRITEABLE: {
      if (close_requested_ && stopping_close_) {
        lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, nullptr, 0);
        return -1;
      }
      if (close_requested_) {
        if (close_sent_ || drop_requested_) return 0;
        // A close frame (1000), then nothing: the server's close answer or its end of TCP ends it.
        // Built here and written raw: lws's own close (lws_close_reason) gives up after 5 s.
        unsigned char frame[LWS_PRE + 8];
        unsigned char* f = frame + LWS_PRE;
        f[0] = 0x88;  // FIN + close
        f[1] = 0x82;  // masked (a client's frames are), 2 bytes of payload
        lws_get_random(lws_get_context(wsi), f + 2, 4);
        f[6] = static_cast<unsigned char>((LWS_CLOSE_STATUS_NORMAL >> 8) ^ f[2]);
        f[7] = static_cast<unsigned char>((LWS_CLOSE_STATUS_NORMAL & 0xff) ^ f[3]);
        if (lws_write(wsi, f, 8, LWS_WRITE_RAW) < 8) return -1;
        close_sent_ = true;
        return 0;
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
      Ended(WsEnd::kConnectFailed,
            in ? std::string("connect failed: ") + static_cast<const char*>(in) : "connect failed");
      return 0;
    case LWS_CALLBACK_CLIENT_CLOSED: {
      lws_set_opaque_user_data(wsi, nullptr);
      if (close_requested_) {
        const char* why = !running_ ? "stopped" : drop_requested_ ? "no server hello, close unanswered: dropped"
                                                                  : EndName(WsEnd::kClientClose);
        Ended(WsEnd::kClientClose, why);
      } else if (peer_close_code_ >= 0) {
        Ended(WsEnd::kServerClose, std::string(EndName(WsEnd::kServerClose)) + " (" +
                                       std::to_string(peer_close_code_) + ")");
      } else {
        Ended(WsEnd::kConnectionLost, EndName(WsEnd::kConnectionLost));
      }
      return 0;
    }
    default:
      return 0;
  }
}

}  // namespace voxgate
