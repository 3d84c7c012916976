// Firmware update over the air: the portable decisions. The OTA answer's
// `firmware {version, url, force?, size?, sha256?}` section is read here,
// compared with the running version (semantic versioning), and after the
// reboot into a new image the device decides whether to keep it. The
// transfer itself is platform code: esp_https_ota on the device
// (esp/esp_firmware_update.cc), libwebsockets + OpenSSL on the host
// (host/lws_firmware_download.cc).
#pragma once

#include <cstdint>
#include <string>

struct cJSON;

namespace voxgate {

// A semantic version (https://semver.org): MAJOR.MINOR.PATCH[-pre][+build].
// A leading "v" and missing MINOR/PATCH ("v1", "1.2") are accepted, as
// firmware versions are often written that way.
struct SemVer {
  uint32_t major = 0;
  uint32_t minor = 0;
  uint32_t patch = 0;
  std::string prerelease;  // dot-separated identifiers; empty for a release
};

bool ParseSemVer(const std::string& text, SemVer* out);
// True for MAJOR.MINOR.PATCH in digits only, each part an int without a
// leading zero: the versions every xiaozhi firmware can parse (it converts
// each dot-separated part with std::stoi, built without exceptions, so "v1"
// or "rc" aborts the device). firmware/version.txt must be one.
bool IsNumericVersion(const std::string& text);
// <0, 0, >0 by semver precedence (build metadata ignored; a pre-release
// sorts before its release; numeric identifiers compare as numbers).
int CompareSemVer(const SemVer& a, const SemVer& b);

// The `firmware` section of an OTA answer. The gateway adds `size` and
// `sha256` when it serves the image itself; other servers may omit them.
struct FirmwareOffer {
  std::string version;
  std::string url;
  bool force = false;   // install even when not newer (a downgrade), never the running version
  int64_t size = -1;    // bytes, -1 when unknown
  std::string sha256;   // 64 lowercase hex characters, empty when unknown
};

// Reads root["firmware"]; false when absent or without a version and a URL.
bool ReadFirmwareOffer(const cJSON* root, FirmwareOffer* offer);

struct UpdateDecision {
  bool update = false;
  std::string reason;  // for the log and the progress notification
};

// Whether to install `offer` over `running_version`. `rejected_version` is
// the image that was last rolled back (never retried unless forced).
UpdateDecision DecideUpdate(const std::string& running_version, const FirmwareOffer& offer,
                            const std::string& rejected_version = "");

// True when `hex` is a well-formed SHA-256 digest (64 hex characters) equal,
// ignoring case, to `expected`.
bool Sha256Matches(const std::string& hex, const std::string& expected);
std::string HexLower(const uint8_t* bytes, size_t length);

// Checks a finished transfer's byte count against the announced
// Content-Length and the offer's size. Empty when it passes, else why not.
std::string VerifyTransfer(const FirmwareOffer& offer, int64_t announced_length, int64_t received);
// VerifyTransfer, then the digest against the offer's sha256.
std::string VerifyDownload(const FirmwareOffer& offer, int64_t announced_length, int64_t received,
                           const std::string& sha256_hex);

// Progress as the device reports it: JSON-RPC notification
// `notifications/firmware_update` with these params. States: "downloading"
// (percent, bytes, total), "verifying", "installed" (rebooting into it),
// "failed" (error), "confirmed" (the new image reached the gateway and is
// kept), "rolled_back" (the previous image runs again).
constexpr const char* kFirmwareUpdateMethod = "notifications/firmware_update";

struct FirmwareProgress {
  std::string state;
  std::string version;
  int64_t bytes = -1;   // omitted when < 0
  int64_t total = -1;   // omitted when < 0
  std::string error;    // omitted when empty
};

// Builds the params object (caller owns it).
cJSON* FirmwareProgressParams(const FirmwareProgress& progress);

// Limits "downloading" notifications to one per `step_percent` (and one per
// `min_interval_ms` when the size is unknown), so a slow link is not flooded.
class ProgressThrottle {
 public:
  ProgressThrottle(int step_percent = 10, uint64_t min_interval_ms = 1000)
      : step_(step_percent), interval_ms_(min_interval_ms) {}
  // True when this point deserves a notification. `total` < 0: unknown.
  bool Due(int64_t bytes, int64_t total, uint64_t now_ms);

 private:
  int step_;
  uint64_t interval_ms_;
  int last_percent_ = -1;
  uint64_t last_ms_ = 0;
  bool any_ = false;
};

// After the reboot into a new image (pending verification), the image is
// kept only once it has reached the gateway and answered `initialize`: then
// the gateway can talk to it, which is what the update must not break. If
// that does not happen before the deadline, the device rolls back.
class BootConfirmation {
 public:
  enum class Verdict { kNone, kMarkValid, kRollBack };

  // `pending_verify`: the running image is new and not yet confirmed.
  BootConfirmation(bool pending_verify, uint64_t boot_ms, uint64_t deadline_ms);

  // Feed every MCP text from the gateway *after* the server handled it; it
  // notices an answered `initialize` request.
  void OnMcpHandled(const std::string& payload);
  // Returns a verdict once (then kNone): kMarkValid after `initialize`,
  // kRollBack when the deadline passed first.
  Verdict Poll(uint64_t now_ms);

  bool pending() const { return pending_; }
  bool initialized() const { return initialized_; }

  // Whether the text is a JSON-RPC request for `initialize` (with an id).
  static bool IsInitializeRequest(const std::string& payload);

 private:
  bool pending_;
  bool initialized_ = false;
  uint64_t deadline_at_ms_;
};

// How long a new image has to reach the gateway before it is rolled back.
constexpr uint64_t kDefaultConfirmDeadlineMs = 10 * 60 * 1000;

}  // namespace voxgate
