#include "voxgate/ota_client.h"

#include <algorithm>

namespace voxgate {
namespace {

// An answer that asks for activation again and again (after each approval,
// or without a challenge to poll with) ends the check after this many asks.
constexpr int kMaxChecks = 8;

}  // namespace

std::string ActivateUrl(const std::string& ota_url) {
  return ota_url + (!ota_url.empty() && ota_url.back() == '/' ? "activate" : "/activate");
}

const char* ActivationStateName(ActivationState state) {
  switch (state) {
    case ActivationState::kCode: return "code";
    case ActivationState::kActivated: return "activated";
    case ActivationState::kRejected: return "rejected";
    case ActivationState::kTimedOut: return "timed_out";
  }
  return "unknown";
}

OtaClient::OtaClient(OtaClientOptions options, Clock now, Wait wait, Post post)
    : options_(std::move(options)), now_(std::move(now)), wait_(std::move(wait)), post_(std::move(post)) {}

bool OtaClient::Fetch(const LinkConfig& stored, LinkConfig* config, std::string* error) {
  uint64_t deadline_ms = 0;  // set by the first activation answer: the whole wait is bounded by it
  std::string shown;
  for (int check = 0; check < kMaxChecks; ++check) {
    OtaAnswer answer;
    if (!Check(stored, &answer, error)) return false;
    if (!answer.has_activation) {
      if (!answer.has_link) break;
      *config = answer.link;
      return true;
    }
    const OtaActivation& activation = answer.activation;
    if (deadline_ms == 0) {
      const uint32_t timeout = activation.timeout_ms == 0 ? options_.default_activation_timeout_ms
                                                          : std::min(activation.timeout_ms, options_.max_activation_timeout_ms);
      deadline_ms = now_() + timeout;
    }
    if (activation.code != shown) {  // the same code on every retry: shown once
      shown = activation.code;
      Report(ActivationState::kCode, activation);
    }
    switch (AwaitApproval(activation, deadline_ms)) {
      case Approval::kApproved:
        Report(ActivationState::kActivated, activation);
        continue;  // the next check collects the credentials
      case Approval::kAskAgain:
        continue;
      case Approval::kRejected:
        Report(ActivationState::kRejected, activation);
        *error = "an operator rejected this device's activation";
        return false;
      case Approval::kTimedOut:
        Report(ActivationState::kTimedOut, activation);
        *error = "activation was not approved in time";
        return false;
      case Approval::kStopped:
        *error = "stopped while waiting for activation";
        return false;
    }
  }
  *error = "the OTA endpoint kept asking for activation";
  return false;
}

bool OtaClient::Check(const LinkConfig& stored, OtaAnswer* answer, std::string* error) {
  Headers headers = OtaRequestHeaders(options_.identity, options_.info);
  const std::string proof = OtaProof(stored);
  if (!proof.empty()) headers.emplace_back("Authorization", proof);
  HttpAnswer http;
  if (!post_(options_.url, headers, OtaRequestBody(options_.identity, options_.info), &http, error)) return false;
  if (http.status != 200) {
    *error = "OTA answered HTTP " + std::to_string(http.status);
    return false;
  }
  if (!ParseOtaAnswer(http.body, stored, answer)) {
    *error = "the OTA answer has neither a websocket nor an mqtt section, nor an activation";
    return false;
  }
  return true;
}

OtaClient::Approval OtaClient::AwaitApproval(const OtaActivation& activation, uint64_t deadline_ms) {
  if (activation.challenge.empty()) {  // nothing to poll with (as the reference firmware): ask the OTA endpoint again
    if (!Sleep(options_.retry_poll_ms, deadline_ms)) return Approval::kStopped;
    return now_() >= deadline_ms ? Approval::kTimedOut : Approval::kAskAgain;
  }
  // The v1 activation body: this device has no eFuse key to answer the challenge with.
  const Headers headers = OtaRequestHeaders(options_.identity, options_.info);
  const std::string url = ActivateUrl(options_.url);
  for (;;) {
    if (now_() >= deadline_ms) return Approval::kTimedOut;
    HttpAnswer http;
    std::string ignored;
    uint32_t delay = options_.retry_poll_ms;
    if (post_(url, headers, "{}", &http, &ignored)) {
      if (http.status == 200) return Approval::kApproved;
      if (http.status == 403) return Approval::kRejected;
      if (http.status == 404) return Approval::kAskAgain;  // the claim expired or is unknown: a new check makes a new one
      if (http.status == 202) delay = options_.pending_poll_ms;
    }
    if (!Sleep(delay, deadline_ms)) return Approval::kStopped;
  }
}

bool OtaClient::Sleep(uint32_t ms, uint64_t deadline_ms) {
  const uint64_t now = now_();
  const uint64_t left = deadline_ms > now ? deadline_ms - now : 0;
  return wait_(static_cast<uint32_t>(std::min<uint64_t>(ms, left)));
}

void OtaClient::Report(ActivationState state, const OtaActivation& activation) {
  if (on_activation_) on_activation_(state, activation);
}

}  // namespace voxgate
