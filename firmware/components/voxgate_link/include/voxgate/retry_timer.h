// A retry that falls due at a point in time: each failure arms it one backoff
// delay (exponential, with jitter) ahead; a success disarms it and starts the
// delays over. Not thread-safe: the owner serialises calls. Used for the MQTT
// reconnect on the device (esp-mqtt's own reconnect is off, see
// esp_mqtt_protocol.cc), the host links, and the boot-time OTA config request.
#pragma once

#include <cstdint>

#include "voxgate/backoff.h"

namespace voxgate {

class RetryTimer {
 public:
  explicit RetryTimer(Backoff backoff) : backoff_(backoff) {}

  // Arms the timer (re-arms it if already armed); returns the delay chosen.
  uint32_t Failed(uint64_t now_ms);
  // Disarms, and the next failure waits the shortest delay again.
  void Succeeded();
  // True once per arming, when the due time has come (the timer disarms).
  bool Due(uint64_t now_ms);
  // Disarms without touching the backoff (e.g. the link is being stopped).
  void Cancel() { armed_ = false; }

  bool armed() const { return armed_; }
  uint64_t due_ms() const { return due_ms_; }
  uint32_t failures() const { return backoff_.attempts(); }

 private:
  Backoff backoff_;
  uint64_t due_ms_ = 0;
  bool armed_ = false;
};

}  // namespace voxgate
