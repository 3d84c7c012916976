// Reconnect delays: exponential with jitter, so a fleet that lost its gateway
// does not come back in lockstep.
#pragma once

#include <cstdint>

namespace voxgate {

class Backoff {
 public:
  // Delays grow initial, 2x, 4x ... up to max; each is drawn uniformly from
  // [base/2, base] ("equal jitter").
  Backoff(uint32_t initial_ms = 500, uint32_t max_ms = 30000, uint32_t seed = 1);

  uint32_t NextDelayMs();
  void Reset() { attempt_ = 0; }
  uint32_t attempts() const { return attempt_; }

 private:
  uint32_t Random();

  uint32_t initial_ms_;
  uint32_t max_ms_;
  uint32_t state_;
  uint32_t attempt_ = 0;
};

}  // namespace voxgate
