#include "test_gateway.h"

#include <libwebsockets.h>

#include <cstring>
#include <vector>

namespace {

int Callback(lws* wsi, enum lws_callback_reasons reason, void* user, void* in, size_t len) {
  auto* gateway = static_cast<TestGateway*>(lws_context_user(lws_get_context(wsi)));
  if (gateway && reason != LWS_CALLBACK_HTTP) {
    const int rc = gateway->OnEvent(wsi, reason, in, len);
    if (rc != 1) return rc;  // 1: not handled here
  }
  return lws_callback_http_dummy(wsi, reason, user, in, len);
}

const lws_protocols kProtocols[] = {
    {"test-gateway", Callback, 0, 4096, 0, nullptr, 0},
    {nullptr, nullptr, 0, 0, 0, nullptr, 0},
};

std::string CustomHeader(lws* wsi, const char* name) {
  const int n = static_cast<int>(strlen(name));
  const int length = lws_hdr_custom_length(wsi, name, n);
  if (length <= 0) return "";
  std::vector<char> buffer(static_cast<size_t>(length) + 1);
  if (lws_hdr_custom_copy(wsi, buffer.data(), static_cast<int>(buffer.size()), name, n) < 0) return "";
  return buffer.data();
}

}  // namespace

TestGateway::TestGateway() {
  lws_set_log_level(LLL_ERR, nullptr);
  lws_context_creation_info info;
  memset(&info, 0, sizeof info);
  info.port = 0;  // the kernel picks a free port
  info.iface = "127.0.0.1";
  info.protocols = kProtocols;
  info.user = this;
  info.fd_limit_per_thread = 64;
  context_ = lws_create_context(&info);
  if (context_ == nullptr) return;
  port_ = lws_get_vhost_listen_port(lws_get_vhost_by_name(context_, "default"));
  thread_ = std::thread([this] {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_) break;
      }
      if (lws_service(context_, 0) < 0) break;
    }
  });
}

TestGateway::~TestGateway() {
  if (context_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  lws_cancel_service(context_);
  thread_.join();
  lws_context_destroy(context_);
}

std::string TestGateway::NextFrame(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [this] { return !inbox_.empty(); })) return "";
  std::string frame = inbox_.front();
  inbox_.pop_front();
  return frame;
}

void TestGateway::Send(const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    outbox_.emplace_back(text, Piece::kWhole);
  }
  lws_cancel_service(context_);
}

void TestGateway::SendFragmented(const std::vector<std::string>& parts) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < parts.size(); ++i) {
      outbox_.emplace_back(parts[i], i == 0 ? Piece::kFirst : i + 1 == parts.size() ? Piece::kLast : Piece::kMiddle);
    }
  }
  lws_cancel_service(context_);
}

void TestGateway::CloseConnection(int code) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    close_code_ = code;
  }
  lws_cancel_service(context_);
}

void TestGateway::DropConnection() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    drop_ = true;
  }
  lws_cancel_service(context_);
}

std::string TestGateway::Header(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = headers_.find(name);
  return it == headers_.end() ? "" : it->second;
}

int TestGateway::connections() {
  std::lock_guard<std::mutex> lock(mutex_);
  return connections_;
}

int TestGateway::OnEvent(lws* wsi, int reason, void* in, size_t len) {
  switch (reason) {
    case LWS_CALLBACK_ESTABLISHED: {
      std::map<std::string, std::string> headers;
      char auth[256] = "";
      if (lws_hdr_copy(wsi, auth, sizeof auth, WSI_TOKEN_HTTP_AUTHORIZATION) > 0) headers["authorization"] = auth;
      headers["protocol-version"] = CustomHeader(wsi, "protocol-version:");
      headers["device-id"] = CustomHeader(wsi, "device-id:");
      headers["client-id"] = CustomHeader(wsi, "client-id:");
      std::lock_guard<std::mutex> lock(mutex_);
      headers_ = headers;
      wsi_ = wsi;
      drop_ = false;
      close_code_ = 0;
      outbox_.clear();
      ++connections_;
      return 0;
    }
    case LWS_CALLBACK_RECEIVE: {
      partial_.append(static_cast<const char*>(in), len);
      if (lws_is_final_fragment(wsi) && lws_remaining_packet_payload(wsi) == 0) {
        std::lock_guard<std::mutex> lock(mutex_);
        inbox_.push_back(partial_);
        partial_.clear();
        cv_.notify_all();
      }
      return 0;
    }
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED: {
      std::lock_guard<std::mutex> lock(mutex_);
      if (wsi_ && (drop_ || close_code_ > 0 || !outbox_.empty())) lws_callback_on_writable(wsi_);
      return 0;
    }
    case LWS_CALLBACK_SERVER_WRITEABLE: {
      std::string frame;
      Piece piece = Piece::kWhole;
      bool more = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (drop_) return -1;  // closes the connection
        if (close_code_ > 0) {
          static const char kReason[] = "going away";
          lws_close_reason(wsi, static_cast<lws_close_status>(close_code_),
                           reinterpret_cast<unsigned char*>(const_cast<char*>(kReason)), sizeof kReason - 1);
          close_code_ = 0;
          return -1;  // lws sends the close frame and waits for the device's answer
        }
        if (outbox_.empty()) return 0;
        frame = outbox_.front().first;
        piece = outbox_.front().second;
        outbox_.pop_front();
        more = !outbox_.empty();
      }
      int flags = LWS_WRITE_TEXT;
      if (piece == Piece::kFirst) flags = LWS_WRITE_TEXT | LWS_WRITE_NO_FIN;
      if (piece == Piece::kMiddle) flags = LWS_WRITE_CONTINUATION | LWS_WRITE_NO_FIN;
      if (piece == Piece::kLast) flags = LWS_WRITE_CONTINUATION;
      std::vector<unsigned char> buffer(LWS_PRE + frame.size());
      memcpy(buffer.data() + LWS_PRE, frame.data(), frame.size());
      lws_write(wsi, buffer.data() + LWS_PRE, frame.size(), static_cast<lws_write_protocol>(flags));
      if (more) lws_callback_on_writable(wsi);
      return 0;
    }
    case LWS_CALLBACK_CLOSED: {
      std::lock_guard<std::mutex> lock(mutex_);
      if (wsi_ == wsi) wsi_ = nullptr;
      partial_.clear();
      return 0;
    }
    default:
      return 1;
  }
}
