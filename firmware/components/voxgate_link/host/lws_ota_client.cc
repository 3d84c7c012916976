// Host only: the OTA client's HTTP POST with the libwebsockets HTTP client,
// on a short-lived context serviced by the calling thread (lws_http_request.h).
#include <utility>

#include "lws_http_request.h"
#include "voxgate/ota_client.h"
#include "voxgate/url.h"

namespace voxgate {
namespace {

struct Request : LwsHttpRequest {
  Headers headers;
  std::string body;
  std::string answer;
  int status = 0;
};

int Callback(lws* wsi, enum lws_callback_reasons reason, void* user, void* in, size_t len) {
  auto* request = static_cast<Request*>(LwsHttpRequestOf(wsi));
  if (request == nullptr) return lws_callback_http_dummy(wsi, reason, user, in, len);
  int result = 0;
  if (LwsHttpCommonEvent(request, wsi, reason, in, &result)) return result;
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
    case LWS_CALLBACK_RECEIVE_CLIENT_HTTP_READ:
      if (request->answer.size() + len > kMaxOtaAnswerBytes) {
        request->error = "answer too large";
        return -1;
      }
      request->answer.append(static_cast<const char*>(in), len);
      return 0;
    default:
      return 0;
  }
}

const lws_protocols kProtocols[] = {
    {"voxgate-ota", Callback, 0, 0, 0, nullptr, 0},
    {nullptr, nullptr, 0, 0, 0, nullptr, 0},
};

}  // namespace

bool OtaHttpPost(const std::string& url_text, const Headers& headers, const std::string& body, HttpAnswer* answer,
                 std::string* error) {
  Url url;
  if (!ParseUrl(url_text, &url) || (url.scheme != "http" && url.scheme != "https")) {
    *error = "not an http(s) URL: " + url_text;
    return false;
  }
  Request request;
  request.headers = headers;
  request.body = body;
  LwsHttpRun(url, "POST", kProtocols, &request);  // the whole request has 10 s (no Touch)
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
