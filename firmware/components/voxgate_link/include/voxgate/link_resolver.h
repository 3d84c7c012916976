// Boot recovery for the link config. At boot the device asks the OTA endpoint
// where to connect. When that fails it serves the last good answer (kept in the
// ConfigStore) or the configured fallback at once, and keeps asking in the
// background; with nothing to serve it waits (backoff with jitter, so a fleet
// that booted together does not ask in lockstep) and asks again until it gets
// an answer. Portable: the HTTP request, the clock and the wait are passed in.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "voxgate/ota_config.h"
#include "voxgate/retry_timer.h"

namespace voxgate {

class LinkResolver {
 public:
  // Asks the OTA endpoint; the answer is applied over `stored` (the last good
  // config, whose credentials the request presents): see OtaClient::Fetch.
  using Fetch = std::function<bool(const LinkConfig& stored, LinkConfig* config, std::string* error)>;
  using Clock = std::function<uint64_t()>;        // monotonic milliseconds
  using Wait = std::function<void(uint32_t ms)>;  // blocks (vTaskDelay on the device)
  using Log = std::function<void(const std::string& line)>;

  enum class Source : unsigned char { kNone, kOta, kStored, kFallback };

  // `fallback` without a websocket or mqtt section means "no fallback".
  LinkResolver(Fetch fetch, ConfigStore& store, Backoff backoff, LinkConfig fallback = {});
  void SetLog(Log log) { log_ = std::move(log); }

  // Returns the config to connect with; blocks only while there is none.
  LinkConfig Resolve(const Clock& now, const Wait& wait);
  // Call periodically after Resolve: asks again when a retry is due. True when
  // the answer differs from the config being served (stored as the new last
  // good config; `fresh` receives it). Never blocks longer than one request.
  bool Poll(uint64_t now_ms, LinkConfig* fresh);

  Source source() const { return source_; }
  bool retrying() const { return timer_.armed(); }
  uint32_t failures() const { return timer_.failures(); }

 private:
  bool Ask(LinkConfig* config);

  Fetch fetch_;
  ConfigStore& store_;
  RetryTimer timer_;
  LinkConfig fallback_;
  LinkConfig served_;
  Source source_ = Source::kNone;
  Log log_;
};

}  // namespace voxgate
