// Host only: one HTTP(S) request on a short-lived libwebsockets context
// serviced by the calling thread. The OTA client's POST (lws_ota_client.cc)
// and the firmware download's GET (lws_firmware_download.cc) differ only in
// their callbacks; the context, the connection, the timer, the loop and the
// events both treat alike are here.
#pragma once

#include <libwebsockets.h>

#include <string>

#include "voxgate/url.h"

namespace voxgate {

// A request's state as its callback and the loop share it: a request derives
// its own state from this and lws hands it back as the connection's opaque
// user data (LwsHttpRequestOf).
struct LwsHttpRequest {
  std::string error;  // why it failed, when it did
  bool done = false;  // ends the loop; set by the callback, or by the timer
  // The request fails with "timed out" when no Touch came for this long (the
  // loop arms it once at the start: without Touch it bounds the whole request).
  lws_usec_t timeout_us = 10 * LWS_US_PER_SEC;

  void Touch();  // from the callback when bytes move

  // Standard layout with the sul first, so the timer callback finds the request.
  struct Timer {
    lws_sorted_usec_list_t sul;
    LwsHttpRequest* request;
  };
  Timer timer{};
  lws_context* context = nullptr;
};

// The request of a connection; null for lws's own events (no connection yet).
LwsHttpRequest* LwsHttpRequestOf(lws* wsi);

// The events every request handles alike: reading the body in (it arrives as
// LWS_CALLBACK_RECEIVE_CLIENT_HTTP_READ), completion, a failed connection and
// the close. True when `reason` was one of them; *result is then what the
// callback returns.
bool LwsHttpCommonEvent(LwsHttpRequest* request, lws* wsi, int reason, void* in, int* result);

// Runs `method` on `url` with `protocols[0]` as the callback until the request
// is done. False (request->error set) when it could not even start.
bool LwsHttpRun(const Url& url, const char* method, const lws_protocols* protocols, LwsHttpRequest* request);

}  // namespace voxgate
