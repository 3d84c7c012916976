// Host only: the OTA client's HTTP POST with the libwebsockets HTTP client,
// on a short-lived context serviced by the calling thread.
#include <libwebsockets.h>

#include <cstring>
#include <utility>

#include "trust_roots.h"
#include "voxgate/ota_client.h"
#include "voxgate/url.h"

namespace voxgate {
namespace {

constexpr lws_usec_t kTimeoutUs = 10 * LWS_US_PER_SEC;

struct Request;

// Standard layout with the sul first, so the timer callback finds the request.
struct Timer {
  lws_sorted_usec_list_t sul;
  Request* request;
};

struct Request {
  Timer timeout;
  Headers headers;
  std::string body;
  std::string answer;
  std::string error;
  int status = 0;
  bool done = false;
};

int Callback(lws* wsi, enum lws_callback_reasons reason, void* user, void* in, size_t len) {
  auto* request = wsi ? static_cast<Request*>(lws_get_opaque_user_data(wsi)) : nullptr;
  if (request == nullptr) return lws_callback_http_dummy(wsi, reason, user, in, len);
  switch (reason) {
    case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
      auto** p = static_cast<unsigned char**>(in);
      unsigned char* end = *p + len;
      for (const auto& header : request->headers) {
        const std::string name = header.first + ":";
        if (lws_add_http_header_by_name(wsi, reinterpret_cast<const unsigned char*>(name.c_str()),
                                        reinterpret_cast<const unsigned char*>(header.second.data()),
                                        static_cast<int>(header.second.size()), p, end)) {
          return -1;
        }
      }
      if (lws_add_http_header_content_length(wsi, request->body.size(), p, end)) return -1;
      lws_client_http_body_pending(wsi, 1);
      lws_callback_on_writable(wsi);
      return 0;
    }
    case LWS_CALLBACK_CLIENT_HTTP_WRITEABLE: {
      std::string buffer(LWS_PRE, '\0');
      buffer += request->body;
      lws_client_http_body_pending(wsi, 0);
      if (lws_write(wsi, reinterpret_cast<unsigned char*>(&buffer[LWS_PRE]), request->body.size(),
                    LWS_WRITE_HTTP_FINAL) < static_cast<int>(request->body.size())) {
        return -1;
      }
      return 0;
    }
    case LWS_CALLBACK_ESTABLISHED_CLIENT_HTTP:
      request->status = static_cast<int>(lws_http_client_http_response(wsi));
      return 0;
    case LWS_CALLBACK_RECEIVE_CLIENT_HTTP: {
      char buffer[LWS_PRE + 2048];
      char* p = buffer + LWS_PRE;
      int n = sizeof buffer - LWS_PRE;
      return lws_http_client_read(wsi, &p, &n) < 0 ? -1 : 0;
    }
    case LWS_CALLBACK_RECEIVE_CLIENT_HTTP_READ:
      if (request->answer.size() + len > kMaxOtaAnswerBytes) {
        request->error = "answer too large";
        return -1;
      }
      request->answer.append(static_cast<const char*>(in), len);
      return 0;
    case LWS_CALLBACK_COMPLETED_CLIENT_HTTP:
      request->done = true;
      lws_cancel_service(lws_get_context(wsi));
      return 0;
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
      request->error = in ? static_cast<const char*>(in) : "connection failed";
      request->done = true;
      return 0;
    case LWS_CALLBACK_CLOSED_CLIENT_HTTP:
      request->done = true;
      return 0;
    default:
      return 0;
  }
}

const lws_protocols kProtocols[] = {
    {"voxgate-ota", Callback, 0, 0, 0, nullptr, 0},
    {nullptr, nullptr, 0, 0, 0, nullptr, 0},
};

void OnTimeout(lws_sorted_usec_list_t* sul) {
  Request* request = reinterpret_cast<Timer*>(sul)->request;
  request->error = "timed out";
  request->done = true;
}

}  // namespace

bool OtaHttpPost(const std::string& url_text, const Headers& headers, const std::string& body, HttpAnswer* answer,
                 std::string* error) {
  Url url;
  if (!ParseUrl(url_text, &url) || (url.scheme != "http" && url.scheme != "https")) {
    *error = "not an http(s) URL: " + url_text;
    return false;
  }
  lws_context_creation_info context_info;
  memset(&context_info, 0, sizeof context_info);
  context_info.port = CONTEXT_PORT_NO_LISTEN;
  context_info.protocols = kProtocols;
  context_info.fd_limit_per_thread = 16;
  if (url.tls()) context_info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
  if (url.tls() && !TrustRootsFile().empty()) context_info.client_ssl_ca_filepath = TrustRootsFile().c_str();
  lws_context* context = lws_create_context(&context_info);
  if (context == nullptr) {
    *error = "could not create a libwebsockets context";
    return false;
  }
  Request request;
  memset(&request.timeout.sul, 0, sizeof request.timeout.sul);
  request.timeout.request = &request;
  request.headers = headers;
  request.body = body;

  lws_client_connect_info connect;
  memset(&connect, 0, sizeof connect);
  connect.context = context;
  connect.address = url.host.c_str();
  connect.port = url.port;
  connect.path = url.path.c_str();
  const std::string host_header = url.host_header();
  connect.host = host_header.c_str();
  connect.origin = url.host.c_str();
  connect.method = "POST";
  connect.ssl_connection = url.tls() ? LCCSCF_USE_SSL : 0;
  connect.protocol = kProtocols[0].name;
  connect.opaque_user_data = &request;
  if (lws_client_connect_via_info(&connect) == nullptr && !request.done) {
    request.error = "connect failed";
    request.done = true;
  }
  lws_sul_schedule(context, 0, &request.timeout.sul, OnTimeout, kTimeoutUs);
  while (!request.done) {
    if (lws_service(context, 0) < 0) break;
  }
  lws_sul_cancel(&request.timeout.sul);
  lws_context_destroy(context);

  if (!request.error.empty()) {
    *error = request.error;
    return false;
  }
  if (request.status == 0) {
    *error = "no HTTP answer";
    return false;
  }
  answer->status = request.status;
  answer->body = std::move(request.answer);
  return true;
}

}  // namespace voxgate
