#include "voxgate/backoff.h"

namespace voxgate {

Backoff::Backoff(uint32_t initial_ms, uint32_t max_ms, uint32_t seed)
    : initial_ms_(initial_ms ? initial_ms : 1), max_ms_(max_ms < initial_ms ? initial_ms : max_ms),
      state_(seed ? seed : 0x9e3779b9u) {}

uint32_t Backoff::Random() {  // xorshift32: enough to spread retries
  state_ ^= state_ << 13;
  state_ ^= state_ >> 17;
  state_ ^= state_ << 5;
  return state_;
}

uint32_t Backoff::NextDelayMs() {
  uint64_t base = initial_ms_;
  for (uint32_t i = 0; i < attempt_ && base < max_ms_; ++i) base *= 2;
  if (base > max_ms_) base = max_ms_;
  ++attempt_;
  const uint32_t half = static_cast<uint32_t>(base / 2);
  return half + Random() % (static_cast<uint32_t>(base) - half + 1);
}

}  // namespace voxgate
