// The OTA check, as the reference firmware runs it: POST the device's system
// info (JSON) to the OTA URL with Device-Id/Client-Id headers and the
// device's current credentials (Authorization, see OtaProof), and apply the
// answer over the stored link config. When the answer carries `activation`,
// the device shows the code, polls <ota_url>/activate (202 pending, 200
// approved) within the answer's timeout_ms, and once approved checks again
// to collect its credentials. Portable and blocking; the one HTTP request is
// platform code: esp_http_client (esp/esp_ota_client.cc), libwebsockets
// (host/lws_ota_client.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "voxgate/device_identity.h"
#include "voxgate/ota_config.h"

namespace voxgate {

struct HttpAnswer {
  int status = 0;
  std::string body;
};

// The largest OTA or activation answer the device reads.
constexpr size_t kMaxOtaAnswerBytes = 32 * 1024;

// Platform: one blocking HTTP(S) POST. Any status is an answer; false when
// none came (connect failure, timeout, a body over kMaxOtaAnswerBytes).
bool OtaHttpPost(const std::string& url, const Headers& headers, const std::string& body, HttpAnswer* answer,
                 std::string* error);

// <ota_url>/activate, as the reference firmware builds it.
std::string ActivateUrl(const std::string& ota_url);

struct OtaClientOptions {
  std::string url;
  DeviceIdentity identity;
  SystemInfo info;
  uint32_t pending_poll_ms = 3000;                  // after 202 (pending), as the reference firmware
  uint32_t retry_poll_ms = 10000;                   // after any other answer, or none
  uint32_t default_activation_timeout_ms = 600000;  // when the answer names no timeout_ms
  uint32_t max_activation_timeout_ms = 3600000;     // the longest one check waits for an operator
};

// What the activation shows: "code" (show and speak activation.code),
// "activated" (approved: collecting the credentials), "rejected", "timed_out".
enum class ActivationState : unsigned char { kCode, kActivated, kRejected, kTimedOut };
const char* ActivationStateName(ActivationState state);

class OtaClient {
 public:
  using Post = std::function<bool(const std::string& url, const Headers& headers, const std::string& body,
                                  HttpAnswer* answer, std::string* error)>;
  using Clock = std::function<uint64_t()>;     // monotonic milliseconds
  using Wait = std::function<bool(uint32_t ms)>;  // blocks; false when the device is stopping
  using OnActivation = std::function<void(ActivationState state, const OtaActivation& activation)>;

  OtaClient(OtaClientOptions options, Clock now, Wait wait, Post post = OtaHttpPost);
  void SetActivationHandler(OnActivation handler) { on_activation_ = std::move(handler); }

  // Where to connect: the answer applied over `stored` (whose credentials
  // are presented). Runs the activation when asked. False with `error` when
  // there is no usable answer (the caller retries with backoff).
  bool Fetch(const LinkConfig& stored, LinkConfig* config, std::string* error);

 private:
  enum class Approval : unsigned char { kApproved, kAskAgain, kRejected, kTimedOut, kStopped };

  bool Check(const LinkConfig& stored, OtaAnswer* answer, std::string* error);
  Approval AwaitApproval(const OtaActivation& activation, uint64_t deadline_ms);
  bool Sleep(uint32_t ms, uint64_t deadline_ms);  // false when stopped
  void Report(ActivationState state, const OtaActivation& activation);

  OtaClientOptions options_;
  Clock now_;
  Wait wait_;
  Post post_;
  OnActivation on_activation_;
};

}  // namespace voxgate
