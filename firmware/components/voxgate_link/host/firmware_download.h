// Host only: the device's firmware download, as the host build does it. It
// GETs the offered image over HTTP(S) with libwebsockets, hashes it with
// OpenSSL while it streams into `<path>.part`, verifies size and SHA-256
// against the offer (voxgate::VerifyDownload), and only then renames it to
// `path` -- the host's stand-in for writing the other OTA slot with
// esp_https_ota on the device.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "voxgate/firmware_update.h"

namespace voxgate {

struct DownloadOptions {
  int64_t max_bytes = 16 * 1024 * 1024;  // larger than any app slot
  uint32_t idle_timeout_ms = 15000;      // no byte for this long: give up
  // Called on the calling thread as bytes arrive; total is -1 when unknown.
  std::function<void(int64_t bytes, int64_t total)> on_progress;
};

struct DownloadResult {
  bool ok = false;
  std::string error;   // why not, when !ok
  int64_t bytes = 0;
  std::string sha256;  // lowercase hex of what was received
};

// Blocking. Never leaves a partial or unverified file at `path`.
DownloadResult DownloadFirmware(const FirmwareOffer& offer, const std::string& path, const DownloadOptions& options);

}  // namespace voxgate
