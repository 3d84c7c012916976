#include "voxgate/retry_timer.h"

namespace voxgate {

uint32_t RetryTimer::Failed(uint64_t now_ms) {
  const uint32_t delay = backoff_.NextDelayMs();
  due_ms_ = now_ms + delay;
  armed_ = true;
  return delay;
}

void RetryTimer::Succeeded() {
  armed_ = false;
  backoff_.Reset();
}

bool RetryTimer::Due(uint64_t now_ms) {
  if (!armed_ || now_ms < due_ms_) return false;
  armed_ = false;
  return true;
}

}  // namespace voxgate
