// Host only: see firmware_download.h. One short-lived libwebsockets context
// serviced by the calling thread, as host/lws_ota_client.cc.
#include <libwebsockets.h>
#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "firmware_download.h"
#include "trust_roots.h"
#include "voxgate/url.h"

namespace voxgate {
namespace {

struct Download;

// Standard layout with the sul first, so the timer callback finds the download.
struct Timer {
  lws_sorted_usec_list_t sul;
  Download* download;
};

struct Download {
  Timer idle;
  lws_context* context = nullptr;
  const DownloadOptions* options = nullptr;
  FILE* file = nullptr;
  EVP_MD_CTX* sha = nullptr;
  int64_t announced = -1;  // Content-Length, -1 when absent
  int64_t received = 0;
  int status = 0;
  std::string error;
  bool done = false;

  void Touch() {
    lws_sul_schedule(context, 0, &idle.sul, OnIdle, static_cast<lws_usec_t>(options->idle_timeout_ms) * LWS_US_PER_MS);
  }
  static void OnIdle(lws_sorted_usec_list_t* sul) {
    Download* d = reinterpret_cast<Timer*>(sul)->download;
    d->error = "timed out";
    d->done = true;
  }
};

int Callback(lws* wsi, enum lws_callback_reasons reason, void* user, void* in, size_t len) {
  auto* d = wsi ? static_cast<Download*>(lws_get_opaque_user_data(wsi)) : nullptr;
  if (d == nullptr) return lws_callback_http_dummy(wsi, reason, user, in, len);
  switch (reason) {
    case LWS_CALLBACK_ESTABLISHED_CLIENT_HTTP: {
      d->status = static_cast<int>(lws_http_client_http_response(wsi));
      if (d->status != 200) {
        d->error = "HTTP " + std::to_string(d->status);
        d->done = true;
        return -1;
      }
      char length[24];
      if (lws_hdr_copy(wsi, length, sizeof length, WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0) {
        char* end = nullptr;
        const long long value = strtoll(length, &end, 10);
        if (*end == '\0' && value >= 0) d->announced = value;
      }
      if (d->announced > d->options->max_bytes) {
        d->error = "image larger than " + std::to_string(d->options->max_bytes) + " bytes";
        d->done = true;
        return -1;
      }
      d->Touch();
      return 0;
    }
    case LWS_CALLBACK_RECEIVE_CLIENT_HTTP: {
      char buffer[LWS_PRE + 4096];
      char* p = buffer + LWS_PRE;
      int n = sizeof buffer - LWS_PRE;
      return lws_http_client_read(wsi, &p, &n) < 0 ? -1 : 0;
    }
    case LWS_CALLBACK_RECEIVE_CLIENT_HTTP_READ:
      if (d->received + static_cast<int64_t>(len) > d->options->max_bytes) {
        d->error = "image larger than " + std::to_string(d->options->max_bytes) + " bytes";
        d->done = true;
        return -1;
      }
      if (fwrite(in, 1, len, d->file) != len || EVP_DigestUpdate(d->sha, in, len) != 1) {
        d->error = "could not write the image";
        d->done = true;
        return -1;
      }
      d->received += static_cast<int64_t>(len);
      d->Touch();
      if (d->options->on_progress) d->options->on_progress(d->received, d->announced);
      return 0;
    case LWS_CALLBACK_COMPLETED_CLIENT_HTTP:
      d->done = true;
      lws_cancel_service(lws_get_context(wsi));
      return 0;
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
      if (d->error.empty()) d->error = in ? static_cast<const char*>(in) : "connection failed";
      d->done = true;
      return 0;
    case LWS_CALLBACK_CLOSED_CLIENT_HTTP:
      d->done = true;  // an early close shows as a short image in VerifyDownload
      return 0;
    default:
      return 0;
  }
}

const lws_protocols kProtocols[] = {
    {"voxgate-firmware", Callback, 0, 0, 0, nullptr, 0},
    {nullptr, nullptr, 0, 0, 0, nullptr, 0},
};

}  // namespace

DownloadResult DownloadFirmware(const FirmwareOffer& offer, const std::string& path, const DownloadOptions& options) {
  DownloadResult result;
  Url url;
  if (!ParseUrl(offer.url, &url) || (url.scheme != "http" && url.scheme != "https")) {
    result.error = "not an http(s) URL";
    return result;
  }
  const std::string part = path + ".part";
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> sha(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  FILE* file = fopen(part.c_str(), "wb");
  if (file == nullptr || !sha || EVP_DigestInit_ex(sha.get(), EVP_sha256(), nullptr) != 1) {
    if (file) fclose(file);
    result.error = "cannot write " + part;
    return result;
  }

  lws_context_creation_info info;
  memset(&info, 0, sizeof info);
  info.port = CONTEXT_PORT_NO_LISTEN;
  info.protocols = kProtocols;
  info.fd_limit_per_thread = 16;
  if (url.tls()) info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
  if (url.tls() && !TrustRootsFile().empty()) info.client_ssl_ca_filepath = TrustRootsFile().c_str();
  Download d;
  d.context = lws_create_context(&info);
  if (d.context == nullptr) {
    fclose(file);
    remove(part.c_str());
    result.error = "could not create a libwebsockets context";
    return result;
  }
  memset(&d.idle.sul, 0, sizeof d.idle.sul);
  d.idle.download = &d;
  d.options = &options;
  d.file = file;
  d.sha = sha.get();

  lws_client_connect_info connect;
  memset(&connect, 0, sizeof connect);
  connect.context = d.context;
  connect.address = url.host.c_str();
  connect.port = url.port;
  connect.path = url.path.c_str();
  const std::string host_header = url.host_header();
  connect.host = host_header.c_str();
  connect.origin = url.host.c_str();
  connect.method = "GET";
  connect.ssl_connection = url.tls() ? LCCSCF_USE_SSL : 0;
  connect.protocol = kProtocols[0].name;
  connect.opaque_user_data = &d;
  d.Touch();
  if (lws_client_connect_via_info(&connect) == nullptr && !d.done) {
    d.error = "connect failed";
    d.done = true;
  }
  while (!d.done) {
    if (lws_service(d.context, 0) < 0) break;
  }
  lws_sul_cancel(&d.idle.sul);
  lws_context_destroy(d.context);

  const bool closed = fclose(file) == 0;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_length = 0;
  EVP_DigestFinal_ex(sha.get(), digest, &digest_length);
  result.bytes = d.received;
  result.sha256 = HexLower(digest, digest_length);
  result.error = !d.error.empty() ? d.error
                 : !closed        ? "could not write the image"
                                  : VerifyDownload(offer, d.announced, d.received, result.sha256);
  if (result.error.empty() && rename(part.c_str(), path.c_str()) != 0) result.error = "cannot rename into " + path;
  if (!result.error.empty()) {
    remove(part.c_str());
    return result;
  }
  result.ok = true;
  return result;
}

}  // namespace voxgate
