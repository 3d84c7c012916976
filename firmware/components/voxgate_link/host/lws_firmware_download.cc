// Host only: see firmware_download.h. One GET on a short-lived libwebsockets
// context serviced by the calling thread (lws_http_request.h).
#include <libwebsockets.h>
#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "firmware_download.h"
#include "lws_http_request.h"
#include "voxgate/firmware_install.h"
#include "voxgate/url.h"

namespace voxgate {
namespace {

struct Download : LwsHttpRequest {
  const DownloadOptions* options = nullptr;
  FILE* file = nullptr;
  EVP_MD_CTX* sha = nullptr;
  int64_t announced = -1;  // Content-Length, -1 when absent
  int64_t received = 0;
};

int Callback(lws* wsi, enum lws_callback_reasons reason, void* user, void* in, size_t len) {
  auto* d = static_cast<Download*>(LwsHttpRequestOf(wsi));
  if (d == nullptr) return lws_callback_http_dummy(wsi, reason, user, in, len);
  int result = 0;
  if (LwsHttpCommonEvent(d, wsi, reason, in, &result)) return result;
  switch (reason) {
    case LWS_CALLBACK_ESTABLISHED_CLIENT_HTTP: {
      const int status = static_cast<int>(lws_http_client_http_response(wsi));
      if (status != 200) {
        d->error = "HTTP " + std::to_string(status);
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
  Download d;
  d.timeout_us = static_cast<lws_usec_t>(options.idle_timeout_ms) * LWS_US_PER_MS;  // re-armed by every chunk
  d.options = &options;
  d.file = file;
  d.sha = sha.get();
  if (!LwsHttpRun(url, "GET", kProtocols, &d)) {
    fclose(file);
    remove(part.c_str());
    result.error = d.error;
    return result;
  }

  const bool closed = fclose(file) == 0;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_length = 0;
  EVP_DigestFinal_ex(sha.get(), digest, &digest_length);
  result.bytes = d.received;
  result.sha256 = HexLower(digest, digest_length);
  // The device's install steps: `path` (the slot) is written only once every check passed.
  FirmwareInstall install(offer, false);
  const std::string failure = !d.error.empty() ? d.error : !closed ? "could not write the image" : "";
  if (install.Downloaded(failure.empty() ? TransferEnd::kComplete : TransferEnd::kFailed, failure, d.announced,
                         d.received) == FirmwareInstall::Step::kVerify &&
      install.Verified(true, result.sha256) == FirmwareInstall::Step::kFinish) {
    const bool renamed = rename(part.c_str(), path.c_str()) == 0;
    install.Finished(renamed ? FinishEnd::kDone : FinishEnd::kFailed, "cannot rename into " + path);
  }
  if (install.step() != FirmwareInstall::Step::kDone) {
    remove(part.c_str());
    result.error = install.error();
    return result;
  }
  result.ok = true;
  return result;
}

}  // namespace voxgate
