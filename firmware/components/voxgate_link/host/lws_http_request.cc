// Host only: see lws_http_request.h.
#include "lws_http_request.h"

#include <cstring>

#include "trust_roots.h"

namespace voxgate {
namespace {

void OnTimeout(lws_sorted_usec_list_t* sul) {
  LwsHttpRequest* request = reinterpret_cast<LwsHttpRequest::Timer*>(sul)->request;
  request->error = "timed out";
  request->done = true;
}

}  // namespace

void LwsHttpRequest::Touch() { lws_sul_schedule(context, 0, &timer.sul, OnTimeout, timeout_us); }

LwsHttpRequest* LwsHttpRequestOf(lws* wsi) {
  return wsi ? static_cast<LwsHttpRequest*>(lws_get_opaque_user_data(wsi)) : nullptr;
}

bool LwsHttpCommonEvent(LwsHttpRequest* request, lws* wsi, int reason, void* in, int* result) {
  *result = 0;
  switch (reason) {
    case LWS_CALLBACK_RECEIVE_CLIENT_HTTP: {
      char buffer[LWS_PRE + 4096];
      char* p = buffer + LWS_PRE;
      int n = sizeof buffer - LWS_PRE;
      *result = lws_http_client_read(wsi, &p, &n) < 0 ? -1 : 0;
      return true;
    }
    case LWS_CALLBACK_COMPLETED_CLIENT_HTTP:
      request->done = true;
      lws_cancel_service(lws_get_context(wsi));
      return true;
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
      if (request->error.empty()) request->error = in ? static_cast<const char*>(in) : "connection failed";
      request->done = true;
      return true;
    case LWS_CALLBACK_CLOSED_CLIENT_HTTP:
      request->done = true;  // an early close shows in what the request received
      return true;
    default:
      return false;
  }
}

bool LwsHttpRun(const Url& url, const char* method, const lws_protocols* protocols, LwsHttpRequest* request) {
  lws_context_creation_info info;
  memset(&info, 0, sizeof info);
  info.port = CONTEXT_PORT_NO_LISTEN;
  info.protocols = protocols;
  info.fd_limit_per_thread = 16;
  if (url.tls()) info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
  if (url.tls() && !TrustRootsFile().empty()) info.client_ssl_ca_filepath = TrustRootsFile().c_str();
  request->context = lws_create_context(&info);
  if (request->context == nullptr) {
    request->error = "could not create a libwebsockets context";
    return false;
  }
  memset(&request->timer.sul, 0, sizeof request->timer.sul);
  request->timer.request = request;

  lws_client_connect_info connect;
  memset(&connect, 0, sizeof connect);
  connect.context = request->context;
  connect.address = url.host.c_str();
  connect.port = url.port;
  connect.path = url.path.c_str();
  const std::string host_header = url.host_header();
  connect.host = host_header.c_str();
  connect.origin = url.host.c_str();
  connect.method = method;
  connect.ssl_connection = url.tls() ? LCCSCF_USE_SSL : 0;
  connect.protocol = protocols[0].name;
  connect.opaque_user_data = request;
  request->Touch();
  if (lws_client_connect_via_info(&connect) == nullptr && !request->done) {
    request->error = "connect failed";
    request->done = true;
  }
  while (!request->done) {
    if (lws_service(request->context, 0) < 0) break;
  }
  lws_sul_cancel(&request->timer.sul);
  lws_context_destroy(request->context);
  request->context = nullptr;
  return true;
}

}  // namespace voxgate
